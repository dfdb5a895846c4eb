"""The unit tier keeps its promise: no test here starts a process or touches the network.

tests/unit and tests/hygiene (whose conftest takes these hooks) are what the edit loop runs
(`nox -s unit`, under a minute, no torch, no vLLM, no network). Whatever starts a process
(subprocess, os.fork, os.posix_spawn, os.system, multiprocessing; so also our git, pip and venvs)
or uses a socket to connect, send or serve (HTTP, DNS, a loopback server) fails the test that did
it, at import, in a fixture or in the test, with a message that says where such a test belongs.
The guard wraps the lowest calls every route goes through, so `from subprocess import run` or a
library's own socket is caught.
"""

from __future__ import annotations

import _posixsubprocess
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

MOVE_IT = (
    "tests/unit and tests/hygiene run no process and use no network (docs/architecture.md, 'The test tiers'): "
    "move this test to tests/cli/ (processes: our CLI, git, pip, venvs, loopback servers) "
    "or tests/e2e/ (release wheels from the package index, marked `network`)"
)


def _refuse(what: str, seen: list[str], original: Callable[..., Any], bystanders: set[int]) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() in bystanders:
            # A thread that ran before this test began: a server or pool that a test of another tier left on
            # this xdist worker. The guard is process-wide, so refusing it would fail whichever unit or hygiene
            # test ran then (a hygiene test that reads one file failed so). A thread the test starts is refused.
            return original(*args, **kwargs)
        seen.append(what)
        # pytest.fail raises a BaseException: `except Exception` in the code under test cannot swallow it.
        pytest.fail(f"{what} was called; {MOVE_IT}")

    return refused


# (owner, attribute, what the message calls it): every way out of this process we know of.
GUARDED: list[tuple[Any, str, str]] = [
    (subprocess.Popen, "_execute_child", "subprocess (a child process)"),
    (_posixsubprocess, "fork_exec", "_posixsubprocess.fork_exec (a child process)"),
    (os, "fork", "os.fork"),
    (os, "forkpty", "os.forkpty"),
    (os, "posix_spawn", "os.posix_spawn"),
    (os, "posix_spawnp", "os.posix_spawnp"),
    (os, "system", "os.system"),
    # Sockets are refused where they reach out or serve, not where they are made: urllib3 makes (and
    # binds) one at import to learn whether the machine has IPv6, which is neither.
    (socket.socket, "connect", "socket.connect (a network connection)"),
    (socket.socket, "connect_ex", "socket.connect_ex (a network connection)"),
    (socket.socket, "sendto", "socket.sendto (a datagram out)"),
    (socket.socket, "listen", "socket.listen (a server)"),
    (socket, "getaddrinfo", "socket.getaddrinfo (a DNS lookup)"),
]


@contextmanager
def _guarded() -> Iterator[list[str]]:
    seen: list[str] = []
    bystanders = {thread.ident for thread in threading.enumerate() if thread.ident is not None}
    bystanders.discard(threading.get_ident())
    with pytest.MonkeyPatch.context() as patch:
        for owner, name, what in GUARDED:
            if hasattr(owner, name):
                patch.setattr(owner, name, _refuse(what, seen, getattr(owner, name), bystanders))
        yield seen


def _raise_if(seen: list[str], when: str) -> None:
    # The code under test may have caught the violation (`except BaseException`); it still counts.
    if seen:
        pytest.fail(f"{', '.join(sorted(set(seen)))} was called {when}; {MOVE_IT}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    # Importing a test module runs its top level: that must not start anything either.
    with _guarded() as seen:
        report = yield
    if seen and report.passed:
        report.outcome = "failed"
        report.longrepr = f"{', '.join(sorted(set(seen)))} was called while collecting {collector.nodeid}; {MOVE_IT}"
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _guarded() as seen:
        result = yield
    _raise_if(seen, "in a fixture")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guarded() as seen:
        result = yield
    _raise_if(seen, "in the test")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if nextitem is None:
        # The run's last teardown also finishes every tier's session fixtures (a venv, a server of
        # tests/cli or tests/overlay, when `nox -s test` ends with this tier): not this tier's to judge.
        return (yield)
    with _guarded() as seen:
        result = yield
    _raise_if(seen, "in a fixture's teardown")
    return result
