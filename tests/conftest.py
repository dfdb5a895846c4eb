"""Hooks and fixtures of every suite; shared functions live in tests/helpers/ (`import helpers`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import copy_project, disk_usage
from release.pristine.wheel import cache_dir

# pytester runs a small pytest inside this one: tests/unit/test_tier_guard.py proves the unit tier's guard with it.
# (pytest_plugins is allowed only in a conftest pytest loads at start, as it does this one.)
pytest_plugins = ["pytester"]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # "No tests ran" must fail CI as loudly as a failing test.
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of vendor/ and patches/ that a test may rebase, break and inspect."""
    return copy_project(tmp_path)


# ------------------------------------------------------------------ disk hygiene


def _empty_dirs(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.is_dir() and not any(p.iterdir())} if directory.is_dir() else set()


@dataclass
class RunDisk:
    basetemp: Path
    peak_bytes: int = 0  # the most the run's temp dir held at the end of a test file
    peak_at: str = ""
    end_bytes: int = 0  # after the last test, before pytest removes a passing run's temp dir


RUN_DISK = pytest.StashKey[RunDisk]()


@pytest.fixture(scope="session", autouse=True)
def disk_hygiene(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[None]:
    """Measures the run's temp dir for the summary; the run may add to the wheel cache only wheels."""
    before = _empty_dirs(cache_dir())
    run = request.config.stash[RUN_DISK] = RunDisk(tmp_path_factory.getbasetemp())
    yield
    run.end_bytes = disk_usage(run.basetemp)
    litter = sorted(_empty_dirs(cache_dir()) - before)
    assert not litter, f"the run left empty directories in the wheel cache {cache_dir()}: {litter}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # The last test of a file: its module fixtures (venvs, indexes) still exist until this teardown.
    run = item.config.stash.get(RUN_DISK, None)
    if run is not None and (nextitem is None or nextitem.path != item.path):
        used = disk_usage(run.basetemp)
        if used > run.peak_bytes:
            run.peak_bytes, run.peak_at = used, item.nodeid.split("::")[0]
    return (yield)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    run = config.stash.get(RUN_DISK, None)
    if run is None:
        return
    # pytest removes a passing run's temp dir after the last test (tmp_path_retention_policy).
    kept = "kept: a test failed" if run.basetemp.exists() else "removed: no test failed"
    cache = cache_dir()
    wheels = sorted(cache.glob("*/*.whl"))
    write = terminalreporter.write_line
    terminalreporter.write_sep("-", "disk")
    write(f"this run's temp  {run.peak_bytes / 1e9:6.2f} GB at most (at the end of {run.peak_at or '-'}),")
    write(f"                 {run.end_bytes / 1e9:6.2f} GB at the end in {run.basetemp} ({kept})")
    write(f"pytest temp root {disk_usage(run.basetemp.parent) / 1e9:6.2f} GB in {run.basetemp.parent}, all runs")
    versions = " ".join(wheel.parent.name for wheel in wheels)
    write(f"wheel cache      {disk_usage(cache) / 1e9:6.2f} GB in {cache}: {len(wheels)} wheels ({versions})")
