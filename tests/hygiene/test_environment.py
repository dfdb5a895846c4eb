"""The test environment itself: the CPU build of torch, pinned in one place for nox and for hand-made venvs.

(That the installed torch is that CPU build is checked where torch is installed:
tests/contract/test_torch_cpu.py.)
"""

from __future__ import annotations

import re
import tomllib

from helpers import REPO


def test_the_torch_pin_of_hand_made_venvs_is_the_one_nox_installs() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    by_hand = [
        line.strip()
        for line in (REPO / "tests" / "requirements-torch-cpu.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert by_hand == pyproject["dependency-groups"]["torch-cpu"]


def test_uv_takes_torch_and_nothing_else_from_the_cpu_index() -> None:
    uv = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["uv"]
    (index,) = [entry for entry in uv["index"] if entry["name"] == "pytorch-cpu"]
    assert index["explicit"] is True and re.fullmatch(r"https://download\.pytorch\.org/whl/cpu/?", index["url"])
    assert [name for name, source in uv["sources"].items() if source.get("index") == "pytorch-cpu"] == ["torch"]
