"""Shared, session-scoped artefacts: one built wheel, one index with it, the real vLLM wheels."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import tag_facts
from helpers.build import plan
from release.core.layout import Layout
from release.core.versions import version_of_tag
from release.overlay.build import build
from release.overlay.index import publish
from release.overlay.target import BuildResult
from release.pristine.wheel import pypi_wheel


@pytest.fixture(scope="session")
def layout() -> Layout:
    return Layout.default()


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory, layout: Layout) -> BuildResult:
    return build(plan(layout, tmp_path_factory.mktemp("dist")))


@pytest.fixture(scope="session")
def vllm_wheels() -> dict[str, Path]:
    """The head's real release wheel and another release's (cached; downloaded once with pip where missing)."""
    return {version_of_tag(tag): pypi_wheel(tag) for tag in (tag_facts.head().tag, tag_facts.other_than_head())}


@pytest.fixture(scope="session")
def index(tmp_path_factory: pytest.TempPathFactory, built: BuildResult) -> Path:
    """Our index with the built wheel: the venvs install our overlay from it, and vLLM from its release
    wheel (vllm_wheels), as freshvenv.create does. (A real vLLM wheel in an index of ours:
    test_index.py's own, not every worker's copy of ~0.6 GB.)"""
    directory = tmp_path_factory.mktemp("index")
    publish([built.wheel], directory)
    return directory
