"""Tag-specific facts for the suites, read from data: no test names a vLLM release itself.

- the head of the train: vendor/vllm_fused_moe/UPSTREAM.toml (what vendor/ was built from);
- the train: patches/train.toml;
- the installed vLLM and what its wheel's METADATA pins;
- tests/releases.toml: real releases the tooling tests take as input (rebase scenarios);
- the scan's document (release/overlay/runtime/vllm_fused_moe/affected-releases.json): every release and its line.
"""

from __future__ import annotations

import importlib.metadata
import json
import tomllib
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from helpers import REPO
from helpers.train import load_train
from release.core.layout import Layout
from release.model.lines import HEAD_LINE
from release.model.pin import Pin
from release.model.train import Train, TrainEntry

FLASHINFER = "flashinfer-python"
RELEASES_TOML = REPO / "tests" / "releases.toml"


def layout() -> Layout:
    return Layout.default()


def head() -> Pin:
    return Pin.load(layout().upstream_toml)


def train() -> Train:
    return load_train(layout())


def installed_vllm() -> str:
    return importlib.metadata.version("vllm")


def tag_of_installed_vllm() -> str:
    # Local build labels (0.20.0+cu129) are not part of the release's tag.
    return "v" + Version(installed_vllm()).public


def flashinfer_requirement(metadata: str) -> str:
    """The unconditional flashinfer-python pin in a wheel's METADATA, e.g. 'flashinfer-python==0.6.6'."""
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        try:
            requirement = Requirement(line.removeprefix("Requires-Dist:").strip())
        except InvalidRequirement:
            continue
        if requirement.name == FLASHINFER and requirement.marker is None:
            return f"{FLASHINFER}{requirement.specifier}"
    return ""


def installed_vllm_flashinfer_requirement() -> str:
    metadata = importlib.metadata.metadata("vllm")
    return flashinfer_requirement("".join(f"Requires-Dist: {r}\n" for r in metadata.get_all("Requires-Dist") or []))


def pinned_version(requirement: str) -> str:
    """'flashinfer-python==0.6.8.post1' -> '0.6.8.post1'; a range has no single version."""
    specifiers = list(Requirement(requirement).specifier)
    if len(specifiers) != 1 or specifiers[0].operator != "==":
        raise ValueError(f"{requirement!r} does not pin one version")
    return specifiers[0].version


def _releases() -> dict[str, dict[str, str]]:
    return tomllib.loads(RELEASES_TOML.read_text(encoding="utf-8"))


def rebase_from() -> str:
    return _releases()["rebase"]["from"]


def rebase_to() -> str:
    return _releases()["rebase"]["to"]


def fixed_upstream() -> str:
    """A release that already has patch 0001's change."""
    return _releases()["fixed"]["tag"]


def first_fixed() -> str:
    """The first release upstream fixed every bug of our patches in (the scan data's `fixed_in`)."""
    return "v" + str(json.loads(layout().affected_json.read_text(encoding="utf-8"))["fixed_in"])


def other_than_head() -> str:
    """A real release other than the head: one end of the rebase scenario."""
    return rebase_to() if head().tag != rebase_to() else rebase_from()


def on_no_line() -> str:
    """A real release that no release line covers (older than every line, so in no train): the newest such."""
    releases: dict[str, dict[str, Any]] = json.loads(layout().affected_json.read_text(encoding="utf-8"))["releases"]
    return "v" + max((v for v, entry in releases.items() if entry["line"] is None), key=Version)


def older_line_tag(train: Train) -> TrainEntry:
    """The newest tag of `train` on an older release line that carries a bug: the tag the e2e tests prove an
    older line on (test_evidence.py, test_levels.py), so its pristine evidence run is made once per run."""
    return [e for e in train.entries if e.line != HEAD_LINE and e.bugs][-1]
