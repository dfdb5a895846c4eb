"""A regression test's run cannot fool the evidence or outlive it (issue 43, "Hermetic runs").

Each test here runs a real pytest process through release/evidence/runner.py under this test venv's
interpreter, with a hostile test text that needs neither torch nor vLLM (seconds each): one that reads
the caller's secrets, one that rewrites its report at exit, one that leaves a daemon, one that never
ends, and one that is run with the tool killed under it. The wheel that brings a `pytest11` plugin and
the tampered release tree need a real release wheel (the cache): they are at the end, marked network.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from helpers import REPO, tag_facts
from release.core.errors import BadInputError
from release.core.versions import version_of_tag
from release.evidence import envs, runner, scratch
from release.pristine.wheel import cache_dir, lookup

TEST_PATH = "tests/test_hostile.py"


def run(text: str, work: Path, python: str = sys.executable) -> tuple[str, str, str]:
    work.mkdir(parents=True, exist_ok=True)
    return runner.run_test(python, None, TEST_PATH, textwrap.dedent(text), work)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_run_sees_no_secret_no_caller_pytest_options_and_a_fresh_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: a hostile test read $HOME and saw GITHUB_TOKEN; PYTEST_ADDOPTS changed a verdict without being
    in the cache key. The caller's environment has all three here; the test passes only where it sees none."""
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:python")  # would collect nothing: no verdict at all
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "planted"))
    result = run(
        f"""
        import os, tempfile

        def test_sees_nothing_of_the_caller():
            assert "GITHUB_TOKEN" not in os.environ and "PYTEST_ADDOPTS" not in os.environ
            assert {str(tmp_path / "planted")!r} not in os.environ.get("PYTHONPATH", "")
            home = os.environ["HOME"]
            assert home != {str(Path.home())!r} and os.listdir(home) == []
            assert tempfile.gettempdir() != "/tmp" and os.listdir(tempfile.gettempdir()) == []
        """,
        tmp_path / "work",
    )
    assert result[0] == runner.PASSED, result


def test_a_test_that_rewrites_its_report_at_exit_is_no_pass(tmp_path: Path) -> None:
    """Issue 43: a failing test rewrote its junit.xml into a pass at exit (and exited 0); the verdict is now what
    the tool's own plugin said over its pipe, held to the exit status."""
    result = run(
        """
        import atexit, os, pathlib

        def _lie():
            report = '<testsuite tests="1" failures="0" errors="0" skipped="0"><testcase name="t"/></testsuite>'
            for where in (pathlib.Path.cwd(), pathlib.Path.cwd().parent):
                (where / "junit.xml").write_text(report)
            os._exit(0)

        def test_fails_then_lies():
            atexit.register(_lie)
            assert False, "the bug is here"
        """,
        tmp_path / "work",
    )
    # As a process of its own the run exits 0 against pytest's 1 (an error); forked, its atexit never runs.
    assert result[0] in (runner.ERROR, runner.FAILED), result
    assert result[0] == runner.FAILED or "pytest reported exit 1, but the run exited 0" in result[2], result


def test_a_daemon_the_test_leaves_is_ended_with_the_run(tmp_path: Path) -> None:
    """Issue 43: a daemon (double fork, setsid: outside the run's process group) was left running after
    `evidence` returned. The guard is the run's subreaper and ends it."""
    pid_file = tmp_path / "daemon.pid"
    result = run(
        f"""
        import os, time

        def test_leaves_a_daemon():
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    open({str(pid_file)!r}, "w").write(str(os.getpid()))
                    time.sleep(600)
                os._exit(0)
            deadline = time.time() + 10
            while not os.path.exists({str(pid_file)!r}) and time.time() < deadline:
                time.sleep(0.05)
        """,
        tmp_path / "work",
    )
    assert result[0] == runner.PASSED, result
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the daemon {pid} outlived the run")


def test_a_run_that_never_ends_is_ended_at_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that hangs is ended, with what it started, after RUN_TIMEOUT_S (here 3 s) and is an error."""
    monkeypatch.setattr(runner, "RUN_TIMEOUT_S", 3)
    child = tmp_path / "child.pid"
    started = time.monotonic()
    result = run(
        f"""
        import subprocess, sys, time

        def test_hangs():
            proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            open({str(child)!r}, "w").write(str(proc.pid))
            time.sleep(600)
        """,
        tmp_path / "work",
    )
    assert time.monotonic() - started < 60  # the bound, plus starting a fork server where none runs yet
    assert result[:2] == (runner.ERROR, "timed out"), result
    assert not alive(int(child.read_text()))


def test_the_run_ends_when_the_tool_is_killed(tmp_path: Path) -> None:
    """Killed with SIGKILL mid-run, the tool cannot clean up: its guard sees the tool's pipe close and ends the
    run and everything below it."""
    pid_file = tmp_path / "test.pid"
    test = textwrap.dedent(
        f"""
        import os, time

        def test_waits():
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            time.sleep(600)
        """
    )
    code = (
        "import sys; from pathlib import Path; from release.evidence import runner; "
        f"runner.run_test(sys.executable, None, {TEST_PATH!r}, {test!r}, Path({str(tmp_path / 'work')!r}))"
    )
    (tmp_path / "work").mkdir()
    tool = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid_file.exists(), "the test never started"
    tool.send_signal(signal.SIGKILL)
    tool.wait()
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), "the test's process outlived the tool"


def test_a_killed_runs_work_dir_is_removed_by_the_next_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run killed by SIGKILL leaves its temporary directory; the next run removes it (its lock is free), and
    leaves a live run's alone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = (
        "import os, signal; from release.evidence import runner\n"
        "with runner.work_dir() as work:\n"
        "    print(work, flush=True); os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    killed = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    left = Path(killed.stdout.strip())
    assert killed.returncode == -signal.SIGKILL and left.is_dir() and left.parent == tmp_path
    with runner.work_dir() as mine:
        assert not left.exists()
        assert scratch.remove_abandoned(tmp_path, runner.WORK_PREFIX) == []  # a live one stays
        assert mine.is_dir()


def test_a_python_that_never_answers_is_given_up_at_the_probe_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--python` a script that never exits: the probe of what it has installed gives up after PROBE_TIMEOUT_S
    (30 s, here 2 s), bad input, long before a run's own bound."""
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\nsleep 600\n")
    script.chmod(0o755)
    monkeypatch.setattr(envs, "PROBE_TIMEOUT_S", 2)
    started = time.monotonic()
    with pytest.raises(BadInputError, match="did not say what it has installed within 2 s"):
        envs.given(str(script))
    assert time.monotonic() - started < 10


# ------------------------------------------------------------------ with a real release's tree (the cache)


def plugin_wheel(out: Path) -> Path:
    """A wheel that declares a `pytest11` entry point whose plugin turns every failure into a pass (issue 43:
    loaded automatically in the evidence venv, it made a wheel without the fix prove itself)."""
    name = "flip_plugin"
    wheel = out / f"{name}-1.0-py3-none-any.whl"
    plugin = textwrap.dedent(
        """
        import pytest

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            outcome = yield
            report = outcome.get_result()
            if report.failed:
                report.outcome = "passed"
        """
    )
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}.py": plugin,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": f"[pytest11]\nflip = {name}\n",
    }
    record = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for member, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(member, text)
    return wheel


@pytest.mark.network
def test_a_wheels_pytest_plugin_is_never_loaded(tmp_path: Path) -> None:
    """The wheel run installs the wheel as a user does; a `pytest11` plugin it declares stays unloaded, so a
    failing test fails."""
    tag = tag_facts.older_line_tag(tag_facts.train()).tag
    work = tmp_path / "work"
    work.mkdir()
    python, problem = runner.wheel_venv(sys.executable, tag, plugin_wheel(tmp_path), work)
    assert not problem, problem
    result = runner.run_test(python, None, TEST_PATH, "def test_fails():\n    assert False\n", work)
    assert result[0] == runner.FAILED, result


@pytest.mark.network
def test_a_tampered_release_tree_is_extracted_again_before_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43: a test appended a line to the extracted pristine vLLM tree in the wheel cache, which later runs
    trusted by its directory name. The tree is held to the release's verified members before each use."""
    tag = tag_facts.older_line_tag(tag_facts.train()).tag
    version = version_of_tag(tag)
    shared = cache_dir() / version
    runner.source_tree(tag)  # the release wheel in the user's cache
    # A private cache of that one release (the wheel linked), so the tampering touches no other run's tree.
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(tmp_path / "cache"))
    private = cache_dir() / version
    private.mkdir(parents=True)
    for item in shared.iterdir():
        if item.is_file() and item.name.startswith("vllm-"):
            (private / item.name).symlink_to(item)
    tree = runner.source_tree(tag)
    assert tree.parent == private and lookup(version).sha256[:16] in tree.name
    victim = next(p for p in sorted((tree / "vllm").rglob("*.py")) if p.stat().st_size)
    pristine = victim.read_bytes()
    with victim.open("ab") as handle:
        handle.write(b"\nraise SystemExit('tampered')\n")
    (tree / "vllm" / "planted.py").write_text("x = 1\n")
    assert runner.source_tree(tag) == tree
    assert victim.read_bytes() == pristine and not (tree / "vllm" / "planted.py").exists()
