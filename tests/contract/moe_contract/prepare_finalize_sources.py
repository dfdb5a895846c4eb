"""The prepare/finalize sources a run can load: ours, pristine upstream, and mutants.

Which files depend on the installed release's line (paths.py, `release_line`). vendor/'s own
tag: pristine files come from reverse-applying patch 0001 to a copy of the vendored files (no
network); they are the pinned tag's own (tests/contract/test_sources.py compares them with the
installed vLLM). Any other tag (an older line, or another tag of the head line): pristine is the
installed release's files, ours that line's patch applied to them. A mutant is ours with the fix
taken out of one class, found by AST so that a reformatted file still mutates cleanly: an
`output_is_reduced()` that the fix turned to `return True` goes back to `return False`; one the
fix added to a class that inherits the method (line flashinfer_cutlass) is removed again.
"""

import ast
import importlib.util
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .paths import installed_vllm_root, release_line

VENDORED = "vendored"
PRISTINE = "pristine"


def mutant_name(module: str) -> str:
    return f"mutant-{module}-returns-False"


@dataclass(frozen=True)
class SourceVariant:
    name: str
    directory: Path  # holds <module>.py for each module key of the line (paths.ReleaseLine)


def vendored_variant(workdir: Path | None = None) -> SourceVariant:
    """Our patched files: vendor/ where it is the installed tag's; otherwise the line's patch
    applied to the installed release's files (what the overlay build ships), in `workdir`."""
    line = release_line()
    if line.vendored is not None:
        return SourceVariant(VENDORED, line.vendored)
    if workdir is None:
        raise ValueError(f"line {line.name} has no vendored files: pass a workdir to build them in")
    return SourceVariant(VENDORED, _apply_line_patch(workdir / VENDORED, reverse=False))


def _apply_line_patch(root: Path, reverse: bool) -> Path:
    """Patch (or unpatch) copies of the line's two files under their upstream paths in `root`;
    return a directory holding them as `<module>.py`."""
    line = release_line()
    if reverse:
        source = {module: (line.vendored or Path()) / f"{module}.py" for module in line.modules}
    else:
        installed = installed_vllm_root()
        if installed is None:
            raise ImportError("vLLM is not installed")
        source = {module: installed.parent / line.upstream_file(module) for module in line.modules}
    (root / line.directory).mkdir(parents=True, exist_ok=True)
    for module, path in source.items():
        shutil.copy2(path, root / line.upstream_file(module))
    # GIT_CEILING_DIRECTORIES keeps git from finding an enclosing repository, so the
    # patch's upstream paths resolve against `root` alone.
    files = [f"--include={line.upstream_file(module).as_posix()}" for module in line.modules]
    result = subprocess.run(
        ["git", "apply", *(["-R"] if reverse else []), *files, str(line.patch)],
        cwd=root,
        env={"GIT_CEILING_DIRECTORIES": str(root.parent), "PATH": "/usr/bin:/bin:/usr/local/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"applying {line.patch.name} (reverse={reverse}) failed:\n{result.stderr}")
    target = root / "modules"
    target.mkdir()
    for module in line.modules:
        shutil.copy2(root / line.upstream_file(module), target / f"{module}.py")
    return target


def _copy_flashinfer_modules(source: Path, destination: Path) -> None:
    destination.mkdir(parents=True, exist_ok=True)
    for module in release_line().modules:
        shutil.copy2(source / f"{module}.py", destination / f"{module}.py")


def pristine_variant(workdir: Path) -> SourceVariant:
    """Patch 0001 reverse-applied to vendor/ where it is the installed tag's; otherwise the
    installed release's own files."""
    line = release_line()
    if line.vendored is not None:
        return SourceVariant(PRISTINE, _apply_line_patch(workdir / PRISTINE, reverse=True))
    installed = installed_vllm_root()
    if installed is None:
        raise ImportError("vLLM is not installed")
    target = workdir / PRISTINE / "modules"
    target.mkdir(parents=True)
    for module in line.modules:
        shutil.copy2(installed.parent / line.upstream_file(module), target / f"{module}.py")
    return SourceVariant(PRISTINE, target)


def _output_is_reduced(source: str, class_name: str) -> ast.FunctionDef:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "output_is_reduced":
                    return item
    raise ValueError(f"{class_name} defines no output_is_reduced() to mutate")


def _returned_true(method: ast.FunctionDef) -> tuple[int, int] | None:
    """(line, column) of a `True` that the method returns, if it returns the constant."""
    for stmt in ast.walk(method):
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Constant) and stmt.value.value is True:
            return stmt.value.lineno, stmt.value.col_offset
    return None


def mutant_variant(workdir: Path, module: str, vendored: SourceVariant) -> SourceVariant:
    """Ours with the fix of `module`'s fixed class undone (the module docstring says how)."""
    target = workdir / mutant_name(module)
    _copy_flashinfer_modules(vendored.directory, target)
    path = target / f"{module}.py"
    lines = path.read_text().splitlines(keepends=True)
    class_name = next(cls.name for cls in release_line().classes if cls.module == module)
    method = _output_is_reduced("".join(lines), class_name)
    found = _returned_true(method)
    if found is not None:
        line, col = found
        text = lines[line - 1]
        lines[line - 1] = text[:col] + "False" + text[col + len("True") :]
    else:
        # An override the fix added: remove it, and the blank line that separated it.
        first = min([method.lineno, *(d.lineno for d in method.decorator_list)]) - 1
        last = method.end_lineno or method.lineno
        if last < len(lines) and not lines[last].strip():
            last += 1
        del lines[first:last]
    path.write_text("".join(lines))
    return SourceVariant(mutant_name(module), target)


def load_line_modules(variant: SourceVariant) -> dict[str, ModuleType]:
    """Load the line's modules from `variant` under their upstream names; return module key -> module.

    vLLM's fused_moe package imports the upstream modules itself (all2all_utils), so it
    must be imported first; our copy then replaces the entry in sys.modules.
    """
    from .vllm_layer import reduce_site

    importlib.import_module(reduce_site().module)

    line = release_line()
    loaded: dict[str, ModuleType] = {}
    for module in line.modules:
        name = line.upstream_module(module)
        spec = importlib.util.spec_from_file_location(name, variant.directory / f"{module}.py")
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {module} from {variant.directory}")
        loaded[module] = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded[module]
        spec.loader.exec_module(loaded[module])
    return loaded
