"""The source variants the suite loads are what they claim to be."""

import difflib
import hashlib
from pathlib import Path

import pytest

from helpers import tag_facts
from moe_contract.paths import installed_vllm_root, release_line
from moe_contract.prepare_finalize_sources import SourceVariant

pytestmark = pytest.mark.timeout(30)
MODULES = release_line().modules


def _installed_vllm_file(module: str) -> Path:
    root = installed_vllm_root()
    assert root is not None
    return root.parent / release_line().upstream_file(module)


def _train_hashes(table: str, module: str) -> str:
    """The train's sha256 of the installed tag's `module` file: `pristine` or `patched`."""
    entry = tag_facts.train().get(tag_facts.tag_of_installed_vllm())
    assert entry is not None, f"{tag_facts.tag_of_installed_vllm()} is not in the train"
    assert entry.line == release_line().name
    hashes: dict[str, str] = getattr(entry, table)
    return hashes[release_line().upstream_file(module).name]


def _changed_lines(a: Path, b: Path) -> list[str]:
    diff = difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(), n=0, lineterm="")
    return [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


@pytest.mark.parametrize("module", MODULES)
def test_pristine_copy_equals_the_installed_vllm_file(source_variants: tuple[SourceVariant, ...], module: str) -> None:
    pristine = (source_variants[1].directory / f"{module}.py").read_bytes()
    assert pristine == _installed_vllm_file(module).read_bytes()
    digest = hashlib.sha256(pristine).hexdigest()
    if release_line().vendored is not None:
        assert digest == tag_facts.head().files[f"{module}.py"]
    else:
        assert digest == _train_hashes("pristine", module)


@pytest.mark.parametrize("module", MODULES)
def test_older_line_vendored_copy_is_what_the_train_ships(
    source_variants: tuple[SourceVariant, ...], module: str
) -> None:
    """Where vendor/ is not the installed tag's (an older line, or another tag of the head line),
    our classes are built by applying the line's patch: they must be the bytes the train records
    as that tag's patched file (what its overlay wheel serves)."""
    if release_line().vendored is not None:
        pytest.skip("vendor/ is the installed tag's: our classes are vendor/ itself")
    patched = (source_variants[0].directory / f"{module}.py").read_bytes()
    assert hashlib.sha256(patched).hexdigest() == _train_hashes("patched", module)


@pytest.mark.parametrize("module", MODULES)
def test_mutant_differs_from_vendored_only_in_the_fix(source_variants: tuple[SourceVariant, ...], module: str) -> None:
    mutant = next(v for v in source_variants if module in v.name)
    vendored = source_variants[0].directory
    changed = _changed_lines(vendored / f"{module}.py", mutant.directory / f"{module}.py")
    if [line[0] + line[1:].strip() for line in changed] != ["-return True", "+return False"]:
        # The fix added an override to a class that inherits the method: the mutant drops
        # exactly that override, which are lines the line's patch adds.
        added = {line[1:] for line in release_line().patch.read_text().splitlines() if line.startswith("+")}
        assert changed and all(line.startswith("-") for line in changed), changed
        assert {line[1:] for line in changed} <= added, changed
        assert any("def output_is_reduced(" in line for line in changed), changed
    for other in MODULES:
        if other != module:
            assert _changed_lines(vendored / f"{other}.py", mutant.directory / f"{other}.py") == []
