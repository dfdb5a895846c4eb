"""Hooks and fixtures of every suite; shared functions live in tests/helpers/ (`import helpers`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers import copy_project, disk_usage
from helpers.skips import EXPECTED_SKIPS, expected_skips, unnamed_skips
from release.pristine.wheel import cache_dir

# pytester runs a small pytest inside this one: tests/unit/test_tier_guard.py proves the unit tier's guard with it.
# (pytest_plugins is allowed only in a conftest pytest loads at start, as it does this one.)
pytest_plugins = ["pytester"]


# ------------------------------------------------------------------ expected skips

# (test id, reason) of every skip this process reported: with -n, the controller sees every worker's reports.
SKIPPED: list[tuple[str, str]] = []


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        SKIPPED.append((report.nodeid, _skip_reason(report)))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:  # a module's own pytest.skip or importorskip at its top level
        SKIPPED.append((report.nodeid, _skip_reason(report)))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # "No tests ran" must fail CI as loudly as a failing test (with -n, the controller decides).
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if not hasattr(session.config, "workerinput"):  # the controller, or a run without xdist: every report is here
        unnamed = unnamed_skips(SKIPPED, list(expected_skips()))
        if unnamed:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            for test, why in unnamed:
                line = f"unexpected skip: {test} ({why}): name it in {EXPECTED_SKIPS.name} with why, or make it run"
                if reporter is not None:
                    reporter.write_line(line, red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    run = session.config.stash.get(RUN_DISK, None)
    if run is not None and hasattr(session.config, "workeroutput"):  # a pytest-xdist worker: tell the controller
        session.config.workeroutput["disk"] = [str(run.basetemp), run.peak_bytes, run.peak_at, run.end_bytes]


# ------------------------------------------------------------------ pytest-xdist (`nox -s test` runs -n auto)

# Session fixtures that cost minutes: every test that uses one runs on the same worker, so it is
# made once per run (a session fixture is made once per worker that asks for it). A cheap one (the
# overlay wheel, its index) may be made on each worker; an expensive one that many files share
# belongs here, or builds once across workers behind a file lock into a cache keyed by its content.
SHARED_ON_ONE_WORKER = {
    "contract_run": "contract-runs",  # tests/contract: the multi-process runs of every layout
    "source_variants": "contract-runs",
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """One xdist group per test file (module fixtures: venvs, indexes, probes), or per shared session fixture.

    `--dist loadgroup` hands whole groups to the workers, the next one to whichever is free. Under
    xdist (`nox -s test` passes --no-loadscope-reorder) the groups with a `slow` test, or a shared
    session fixture, are handed out first: the long poles start at once instead of ending the run
    on one worker while the other idles.
    """
    long_poles: set[str] = set()
    for item in items:
        marker = item.get_closest_marker("xdist_group")
        if marker is None:
            fixtures = getattr(item, "fixturenames", ())
            shared = sorted({SHARED_ON_ONE_WORKER[name] for name in fixtures if name in SHARED_ON_ONE_WORKER})
            group = shared[0] if shared else item.nodeid.partition("::")[0]
            item.add_marker(pytest.mark.xdist_group(group))
            if shared:
                long_poles.add(group)
        if item.get_closest_marker("slow") is not None:
            long_poles.add(_group(item))
    if hasattr(config, "workerinput"):  # an xdist worker: the controller schedules in this order
        items.sort(key=lambda item: _group(item) not in long_poles)  # stable: each group's tests in their order


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    assert marker is not None
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))


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


WORKER_DISKS = pytest.StashKey[list[RunDisk]]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: a worker's disk figures (sent from its pytest_sessionfinish)."""
    sent = getattr(node, "workeroutput", {}).get("disk")
    if sent:
        basetemp, peak_bytes, peak_at, end_bytes = sent
        node.config.stash.setdefault(WORKER_DISKS, []).append(RunDisk(Path(basetemp), peak_bytes, peak_at, end_bytes))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    runs = [*config.stash.get(WORKER_DISKS, []), *filter(None, [config.stash.get(RUN_DISK, None)])]
    if not runs:
        return
    write = terminalreporter.write_line
    terminalreporter.write_sep("-", "disk")
    for run in sorted(runs, key=lambda run: str(run.basetemp)):
        # pytest removes a passing run's temp dir after the last test (tmp_path_retention_policy), but never one
        # named by --basetemp: that one is kept whatever the outcome, so its being there says nothing of failures.
        if config.option.basetemp:
            kept = "kept: --basetemp names it"
        else:
            kept = "kept: a test failed" if run.basetemp.exists() else "removed: no test failed"
        write(f"this run's temp  {run.peak_bytes / 1e9:6.2f} GB at most (at the end of {run.peak_at or '-'}),")
        write(f"                 {run.end_bytes / 1e9:6.2f} GB at the end in {run.basetemp} ({kept})")
    # A worker's temp dir is popen-gwN inside the run's (pytest-xdist); the root holds every run's.
    run_dir = runs[0].basetemp.parent if runs[0].basetemp.name.startswith("popen-") else runs[0].basetemp
    root = run_dir.parent
    write(f"pytest temp root {disk_usage(root) / 1e9:6.2f} GB in {root}, all runs")
    cache = cache_dir()
    wheels = sorted(cache.glob("*/*.whl"))
    versions = " ".join(wheel.parent.name for wheel in wheels)
    write(f"wheel cache      {disk_usage(cache) / 1e9:6.2f} GB in {cache}: {len(wheels)} wheels ({versions})")
