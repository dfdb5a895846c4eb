"""In-process checks of what the index may name and how long any network read may take.

The end-to-end attacks (a traversal name, a tampered wheel, a broken transport, through the CLI)
are in tests/e2e/test_index_trust.py; the rules against a loopback address or server (the cache
read offline, a dripping completions server) in tests/cli/test_index_trust.py; here the rules
themselves, on real names.
"""

from __future__ import annotations

import pytest

from release.core.errors import BadInputError, UnsafeIndexError
from release.pristine import transport
from release.pristine.index import checked_name

# Names as PyPI lists them for vllm (a build tag, manylinux tags old and new, a post release, per-CPython).
REAL = [
    ("vllm-0.21.0-1-cp38-abi3-manylinux_2_24_x86_64.whl", "0.21.0"),
    ("vllm-0.20.0-cp38-abi3-manylinux_2_35_x86_64.whl", "0.20.0"),
    ("vllm-0.6.1.post1-cp38-abi3-manylinux1_x86_64.whl", "0.6.1.post1"),
    ("vllm-0.1.4-cp310-cp310-manylinux1_x86_64.whl", "0.1.4"),
    ("vllm-0.10.1.1-cp38-abi3-manylinux1_x86_64.whl", "0.10.1.1"),
]
REFUSED = {
    "a parent in the build tag": ("vllm-0.21.0-1/../../../../x-cp38-abi3-any.whl", "is not a base name"),
    "an absolute name": ("/tmp/vllm-0.21.0-cp38-abi3-any.whl", "is not a base name"),
    "a backslash": ("..\\vllm-0.21.0-cp38-abi3-any.whl", "path separator"),
    "a parent alone": ("..", "is not a base name"),
    "another project": ("torch-0.21.0-cp38-abi3-any.whl", "is not a wheel of vllm"),
    "a name spelled otherwise": ("VLLM-0.21.0-cp38-abi3-any.whl", "is not a wheel file name"),
    "a version not canonical": ("vllm-0.21.0.post01-cp38-abi3-any.whl", "does not spell its version canonically"),
    "another version": ("vllm-0.20.0-cp38-abi3-any.whl", "is not a wheel of vllm 0.21.0"),
    "an sdist": ("vllm-0.21.0.tar.gz", "is not a wheel file name"),
}


@pytest.mark.parametrize(("name", "version"), REAL)
def test_real_release_names_pass(name: str, version: str) -> None:
    assert checked_name(name, version) == name


@pytest.mark.parametrize(("name", "why"), REFUSED.values(), ids=REFUSED.keys())
def test_a_name_that_is_no_canonical_base_name_of_the_release_asked_is_exit_2(name: str, why: str) -> None:
    with pytest.raises(UnsafeIndexError, match=why) as refused:
        checked_name(name, "0.21.0")
    assert refused.value.exit_code == 2


@pytest.mark.parametrize("value", ["soon", "-1", "0"])
def test_a_wait_setting_that_is_no_positive_number_is_bad_input(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(transport.DEADLINE_ENV, value)
    with pytest.raises(BadInputError, match=transport.DEADLINE_ENV):
        transport.settings()
