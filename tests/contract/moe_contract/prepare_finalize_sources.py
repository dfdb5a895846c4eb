"""The prepare/finalize sources a run can load: ours, pristine upstream, and mutants.

Pristine files come from reverse-applying patch 0001 to a copy of the vendored files
(no network); they are the pinned tag's own (tests/contract/test_sources.py compares
them with the installed vLLM). A mutant is the vendored subtree with one `output_is_reduced()` turned
back to `return False`, found by AST so that a reformatted file still mutates cleanly.
"""

import ast
import importlib.util
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .paths import FLASHINFER_NVLINK_CLASSES, PATCH_0001, UPSTREAM_DIR, UPSTREAM_PACKAGE, VENDORED_PREPARE_FINALIZE

VENDORED = "vendored"
PRISTINE = "pristine"


def mutant_name(module: str) -> str:
    return f"mutant-{module}-returns-False"


@dataclass(frozen=True)
class SourceVariant:
    name: str
    directory: Path  # holds flashinfer_nvlink_{two,one}_sided.py


def vendored_variant() -> SourceVariant:
    return SourceVariant(VENDORED, VENDORED_PREPARE_FINALIZE)


def _copy_flashinfer_modules(destination: Path) -> None:
    destination.mkdir(parents=True, exist_ok=True)
    for module in FLASHINFER_NVLINK_CLASSES:
        shutil.copy2(VENDORED_PREPARE_FINALIZE / f"{module}.py", destination / f"{module}.py")


def pristine_variant(workdir: Path) -> SourceVariant:
    root = workdir / PRISTINE
    target = root / UPSTREAM_DIR
    _copy_flashinfer_modules(target)
    # GIT_CEILING_DIRECTORIES keeps git from finding an enclosing repository, so the
    # patch's upstream paths resolve against `root` alone.
    result = subprocess.run(
        ["git", "apply", "-R", "--include", f"{UPSTREAM_DIR.as_posix()}/*", str(PATCH_0001)],
        cwd=root,
        env={"GIT_CEILING_DIRECTORIES": str(root.parent), "PATH": "/usr/bin:/bin:/usr/local/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"reverse-applying {PATCH_0001.name} failed:\n{result.stderr}")
    return SourceVariant(PRISTINE, target)


def _output_is_reduced_return_line(source: str, class_name: str) -> tuple[int, int]:
    """(line, column) of the `True` that `class_name.output_is_reduced` returns."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "output_is_reduced":
                    for stmt in ast.walk(item):
                        if (
                            isinstance(stmt, ast.Return)
                            and isinstance(stmt.value, ast.Constant)
                            and stmt.value.value is True
                        ):
                            return stmt.value.lineno, stmt.value.col_offset
    raise ValueError(f"{class_name}.output_is_reduced() has no `return True` to mutate")


def mutant_variant(workdir: Path, module: str) -> SourceVariant:
    target = workdir / mutant_name(module)
    _copy_flashinfer_modules(target)
    path = target / f"{module}.py"
    lines = path.read_text().splitlines(keepends=True)
    line, col = _output_is_reduced_return_line("".join(lines), FLASHINFER_NVLINK_CLASSES[module])
    text = lines[line - 1]
    lines[line - 1] = text[:col] + "False" + text[col + len("True") :]
    path.write_text("".join(lines))
    return SourceVariant(mutant_name(module), target)


def load_flashinfer_nvlink_classes(variant: SourceVariant) -> dict[str, type]:
    """Load both modules from `variant` under their upstream names; return module -> class.

    vLLM's fused_moe package imports the upstream modules itself (all2all_utils), so it
    must be imported first; our copy then replaces the entry in sys.modules.
    """
    from .vllm_layer import reduce_site

    importlib.import_module(reduce_site().module)

    classes: dict[str, type] = {}
    for module, class_name in FLASHINFER_NVLINK_CLASSES.items():
        name = f"{UPSTREAM_PACKAGE}.{module}"
        spec = importlib.util.spec_from_file_location(name, variant.directory / f"{module}.py")
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {module} from {variant.directory}")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded
        spec.loader.exec_module(loaded)
        classes[module] = getattr(loaded, class_name)
    return classes
