"""tests/unit/conftest.py fails a unit test that starts a process or uses the network, however it does.

A small test suite with the same conftest runs inside this process (pytester's inline run, no
child process): each way out is tried for real, so a guard that stopped guarding fails here.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import REPO
from tests.unit.conftest import GUARDED

GUARD = Path(__file__).with_name("conftest.py")
HYGIENE_GUARD = REPO / "tests" / "hygiene" / "conftest.py"

SUITE = """
import os
import socket
import subprocess
import threading
from subprocess import run

import pytest

import conftest



def test_pure_logic_passes():
    assert sorted([3, 1, 2]) == [1, 2, 3]


def test_subprocess_run():
    subprocess.run(["true"], check=True)


def test_imported_run():
    run(["true"], check=True)


def test_os_system():
    os.system("true")


def test_a_caught_violation_still_fails():
    try:
        subprocess.run(["true"], check=True)
    except BaseException:
        pass


def test_a_loopback_connection():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.connect(("127.0.0.1", 9))


def test_a_loopback_server():
    with socket.create_server(("127.0.0.1", 0)):
        pass


def test_a_socket_that_reaches_nothing_is_no_network():
    # What urllib3 does at import to learn whether this machine has IPv6.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))


def test_a_dns_lookup():
    socket.getaddrinfo("localhost", 80)


def test_a_thread_the_test_starts_is_refused():
    thread = threading.Thread(target=socket.getaddrinfo, args=("localhost", 80))
    thread.start()
    thread.join(30)


def test_every_other_way_out_is_the_refusal_while_a_test_runs():
    # os.fork, os.posix_spawn and friends are not called here: a guard that failed would fork pytest.
    for owner, name, _what in conftest.GUARDED:
        if hasattr(owner, name):
            assert getattr(owner, name).__name__ == "refused", name


@pytest.fixture
def spawns():
    subprocess.run(["true"], check=True)


def test_a_fixture_that_spawns(spawns):
    pass
"""

SWALLOWED_AT_IMPORT = """
import subprocess

try:
    subprocess.run(["true"])
except BaseException:
    pass
"""


def test_the_guard_fails_each_way_out_and_passes_pure_logic(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(GUARD.read_text(encoding="utf-8"))
    pytester.makepyfile(
        test_ways=SUITE,
        test_at_import="import subprocess\nsubprocess.run(['true'])\n",
        test_swallowed_at_import=SWALLOWED_AT_IMPORT,
    )
    outer = {name: getattr(owner, name) for owner, name, _ in GUARDED if hasattr(owner, name)}
    run = pytester.inline_run("-p", "no:cacheprovider", "--continue-on-collection-errors")
    # The inner guard put back what it found (here: this test's own guard), as it does after every test.
    assert {name: getattr(owner, name) for owner, name, _ in GUARDED if hasattr(owner, name)} == outer

    reports = [r for r in run.getreports("pytest_runtest_logreport") if r.when == "call" or r.failed]
    said = {r.nodeid.split("::")[1]: (r.when, r.outcome, str(r.longrepr)) for r in reports}
    assert {name for name, (_, outcome, _) in said.items() if outcome == "passed"} == {
        "test_pure_logic_passes",
        "test_every_other_way_out_is_the_refusal_while_a_test_runs",
        "test_a_socket_that_reaches_nothing_is_no_network",
    }
    expected = {
        "test_subprocess_run": ("call", "subprocess (a child process) was called"),
        "test_imported_run": ("call", "subprocess (a child process) was called"),
        "test_os_system": ("call", "os.system was called"),
        "test_a_caught_violation_still_fails": ("call", "subprocess (a child process) was called in the test"),
        "test_a_loopback_connection": ("call", "socket.connect (a network connection) was called"),
        "test_a_loopback_server": ("call", "socket.listen (a server) was called"),
        "test_a_dns_lookup": ("call", "socket.getaddrinfo (a DNS lookup) was called"),
        "test_a_thread_the_test_starts_is_refused": (
            "call",
            "socket.getaddrinfo (a DNS lookup) was called in the test",
        ),
        "test_a_fixture_that_spawns": ("setup", "subprocess (a child process) was called"),
    }
    for name, (when, message) in expected.items():
        assert said[name][:2] == (when, "failed"), (name, said[name])
        assert message in said[name][2] and "move this test to tests/cli/" in said[name][2], (name, said[name][2])
    failed = {report.nodeid: str(report.longrepr) for report in run.getfailedcollections()}
    assert failed.keys() == {"test_at_import.py", "test_swallowed_at_import.py"}
    assert "subprocess (a child process) was called; " in failed["test_at_import.py"]
    swallowed = failed["test_swallowed_at_import.py"]
    assert "subprocess (a child process) was called while collecting test_swallowed_at_import.py" in swallowed


def test_the_hygiene_tier_has_the_same_guard(pytester: pytest.Pytester) -> None:
    """tests/hygiene/conftest.py, as it stands, refuses a process and passes a pure check."""
    pytester.makeconftest(HYGIENE_GUARD.read_text(encoding="utf-8"))
    pytester.makepyfile(
        test_hygiene="import subprocess\n\ndef test_spawns():\n    subprocess.run(['true'])\n\n"
        "def test_reads_a_file():\n    assert open(__file__, encoding='utf-8').read()\n"
    )
    run = pytester.inline_run("-p", "no:cacheprovider")
    run.assertoutcome(passed=1, failed=1)
    (failed,) = run.getfailures()
    assert failed.nodeid.endswith("::test_spawns")
    assert "subprocess (a child process) was called" in str(failed.longrepr)
    assert "tests/hygiene run no process" in str(failed.longrepr)


@pytest.fixture
def bystander() -> Iterator[tuple[threading.Event, list[str], threading.Thread]]:
    """A thread that runs before the test begins, as a server or pool another tier's test left on an xdist
    worker does; it looks a name up when told to."""
    look_up, said = threading.Event(), []

    def run() -> None:
        look_up.wait(30)
        try:
            socket.getaddrinfo("localhost", 80)
            said.append("ok")
        except BaseException as exc:  # the guard's refusal is pytest's Failed, a BaseException
            said.append(repr(exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield look_up, said, thread
    look_up.set()


def test_a_thread_that_ran_before_the_test_is_not_the_tests_doing(
    bystander: tuple[threading.Event, list[str], threading.Thread],
) -> None:
    # This test runs under the unit tier's guard itself: the lookup must go through, and the test pass.
    look_up, said, thread = bystander
    look_up.set()
    thread.join(30)
    assert said == ["ok"]
