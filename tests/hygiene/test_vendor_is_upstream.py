"""Ours and theirs, apart: vendor/ holds what upstream wrote and its pins; our runtime code stands alone.

The wheel is assembled from two folders (docs/architecture.md, "Ours and theirs"): vendor/vllm_fused_moe/
(upstream's files, the licence and notice that travel with them, the pins) and release/overlay/runtime/
(our code that runs in users' interpreters). These keep each folder what it claims to be. The bytes
of the vendored subtree are `check`'s to prove (tests/cli/test_check_hardening.py); here, which files
may be there at all, and what our runtime code may import.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from release.core.layout import BESIDE_SUBTREE, Layout
from release.queue.load import Queue

LAYOUT = Layout.default()
# Ours, importable under these names wherever the wheel is installed.
OWN = {"vllm_fused_moe", "_vllm_fused_moe_pth", "_vllm_fused_moe_cli"}
# What the runtime may import besides the standard library, and only when a function runs (never at
# interpreter start-up, never needed): the vLLM it serves and what vLLM depends on; cryptography, which
# the doctor verifies signed evidence with where it is importable (its absence is a named finding, issue 47).
LAZY = {"vllm", "packaging", "cryptography"}


def _files(top: Path) -> list[Path]:
    return sorted(p for p in top.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def _vendor_names() -> set[str]:
    """What vendor/vllm_fused_moe/ may hold, relative to it: the subtree's files and the four beside it."""
    queue = Queue.load(LAYOUT)
    cut = len(queue.pin.subtree) + 1
    # Upstream's files: recorded in the pin, or brought in by a patch of the series (an upstream change).
    subtree = set(queue.pin.files) | {name[cut:] for patch in queue.patches for name in patch.files}
    return {f"{LAYOUT.subtree.name}/{name}" for name in subtree} | set(BESIDE_SUBTREE)


def test_vendor_holds_only_upstreams_files_and_their_pins() -> None:
    allowed = _vendor_names()
    # On disk, ignored files too: a clean clone holds exactly what git tracks, and a file git ignores
    # here would still be read as vendored by whoever looks.
    on_disk = {p.relative_to(LAYOUT.vendored).as_posix() for p in _files(LAYOUT.vendored)}
    assert on_disk - allowed == set(), "not upstream's and no pin: our code belongs in release/overlay/runtime/"
    assert set(BESIDE_SUBTREE) <= on_disk
    assert [p.name for p in (LAYOUT.root / "vendor").iterdir()] == ["vllm_fused_moe"]


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(top-level module, line, whether it runs when the module is imported) of every import in `path`."""
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name.split(".")[0], child.lineno, not in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append((child.module.split(".")[0], child.lineno, not in_function))
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def test_our_runtime_imports_the_standard_library_and_itself_only() -> None:
    """It is shipped alone into users' environments: nothing of the tooling (`release`), no dependency
    of ours; vLLM and `packaging` only inside a function, where vLLM is already being imported."""
    modules = [p for p in _files(LAYOUT.runtime) if p.suffix == ".py"]
    assert {p.name for p in modules} >= {"_finder.py", "_activate.py", "_meta.py", "__main__.py", "doctor.py"}
    wrong = []
    for path in modules:
        for name, line, at_import in _imports(path):
            if name in sys.stdlib_module_names or name in OWN or (name in LAZY and not at_import):
                continue
            wrong.append(
                f"{path.relative_to(LAYOUT.root)}:{line}: imports {name}" + (" at import" if at_import else "")
            )
    assert wrong == []
