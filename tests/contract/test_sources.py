"""The source variants the suite loads are what they claim to be."""

import difflib
import hashlib
import importlib.util
from pathlib import Path

import pytest

from helpers import tag_facts
from moe_contract.paths import FLASHINFER_NVLINK_CLASSES, VENDORED_PREPARE_FINALIZE
from moe_contract.prepare_finalize_sources import SourceVariant

pytestmark = pytest.mark.timeout(30)


def _installed_vllm_file(module: str) -> Path:
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "model_executor" / "layers" / "fused_moe" / "prepare_finalize" / f"{module}.py"


def _changed_lines(a: Path, b: Path) -> list[str]:
    diff = difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(), n=0, lineterm="")
    return [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_installed_vllm_is_the_tag_vendor_was_built_from() -> None:
    assert tag_facts.installed_vllm() == tag_facts.head().version


@pytest.mark.parametrize("module", FLASHINFER_NVLINK_CLASSES)
def test_pristine_copy_equals_the_installed_vllm_file(source_variants: tuple[SourceVariant, ...], module: str) -> None:
    pristine = (source_variants[1].directory / f"{module}.py").read_bytes()
    assert pristine == _installed_vllm_file(module).read_bytes()
    assert hashlib.sha256(pristine).hexdigest() == tag_facts.head().files[f"{module}.py"]


@pytest.mark.parametrize("module", FLASHINFER_NVLINK_CLASSES)
def test_mutant_differs_from_vendored_only_in_the_returned_flag(
    source_variants: tuple[SourceVariant, ...], module: str
) -> None:
    mutant = next(v for v in source_variants if module in v.name)
    changed = _changed_lines(VENDORED_PREPARE_FINALIZE / f"{module}.py", mutant.directory / f"{module}.py")
    assert [line[0] + line[1:].strip() for line in changed] == ["-return True", "+return False"]
    other = next(m for m in FLASHINFER_NVLINK_CLASSES if m != module)
    assert _changed_lines(VENDORED_PREPARE_FINALIZE / f"{other}.py", mutant.directory / f"{other}.py") == []
