"""Server lifecycle with real processes (the model-server test double), and the real `vllm serve` argv."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from helpers import LOADED_MACHINE_S, REPO
from helpers.gsm8k import FAKE_SERVER, fake_server_argv, process_gone, wait_until
from release.core.errors import HealthTimeoutError, ServerCrashedError, ServerStartError
from release.gsm8k.server import (
    UPSTREAM_REPORT_SERVE_ARGS,
    ManagedServer,
    build_vllm_serve_argv,
    free_port,
)

pytestmark = pytest.mark.timeout(30)


def managed(tmp_path: Path, port: int, *extra: str, **kwargs: float) -> ManagedServer:
    return ManagedServer(
        fake_server_argv(port, *extra),
        base_url=f"http://127.0.0.1:{port}",
        log_path=tmp_path / "server.log",
        health_timeout_s=kwargs.get("health_timeout_s", 10.0),
        poll_interval_s=0.05,
        stop_grace_s=kwargs.get("stop_grace_s", 5.0),
    )


def test_vllm_serve_argv_has_the_backend_and_parallel_flags() -> None:
    argv = build_vllm_serve_argv(
        "/env/bin/vllm",
        "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4",
        "flashinfer_nvlink_one_sided",
        tensor_parallel_size=2,
        data_parallel_size=4,
        port=8123,
    )
    assert argv[:3] == ["/env/bin/vllm", "serve", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"]
    pairs = {argv[i]: argv[i + 1] for i in range(3, len(argv) - 1) if argv[i].startswith("--")}
    assert pairs["--tensor-parallel-size"] == "2"
    assert pairs["--data-parallel-size"] == "4"
    assert pairs["--all2all-backend"] == "flashinfer_nvlink_one_sided"
    assert pairs["--port"] == "8123"
    assert "--enable-expert-parallel" in argv
    assert argv[-len(UPSTREAM_REPORT_SERVE_ARGS) :] == list(UPSTREAM_REPORT_SERVE_ARGS)


def test_vllm_serve_argv_options() -> None:
    argv = build_vllm_serve_argv(
        "vllm",
        "m",
        "flashinfer_nvlink_two_sided",
        tensor_parallel_size=1,
        data_parallel_size=1,
        port=1,
        enable_expert_parallel=False,
        extra_args=("--max-num-seqs", "8"),
    )
    assert "--enable-expert-parallel" not in argv
    assert argv[-2:] == ["--max-num-seqs", "8"]
    with pytest.raises(ValueError, match="all2all backend"):
        build_vllm_serve_argv("vllm", "m", "deepep_low_latency", tensor_parallel_size=1, data_parallel_size=1, port=1)


def test_start_health_and_stop_leaves_no_process(tmp_path: Path) -> None:
    port = free_port()
    child_file = tmp_path / "child.pid"
    server = managed(tmp_path, port, "--child-pid-file", str(child_file))
    with server:
        assert server.wait_healthy() < 10
        assert server.is_healthy()
        server.check_alive()
        leader = server.pid
        assert wait_until(child_file.exists)
        child = int(child_file.read_text())
        assert not process_gone(child)
    assert leader is not None and process_gone(leader)
    assert wait_until(lambda: process_gone(child), 5), "the forked worker outlived the stop"
    assert not server.is_healthy()


def test_slow_start_is_waited_for(tmp_path: Path) -> None:
    port = free_port()
    with managed(tmp_path, port, "--healthy-after", "0.6") as server:
        assert server.wait_healthy() >= 0.5


def test_health_timeout_reports_log_tail_and_stops(tmp_path: Path) -> None:
    port = free_port()
    server = managed(tmp_path, port, "--healthy-after", "60", health_timeout_s=0.8)
    with pytest.raises(HealthTimeoutError) as caught, server:
        server.wait_healthy()
    assert "did not answer" in str(caught.value)
    assert f"listening on 127.0.0.1:{port}" in str(caught.value)  # the log tail
    assert server.pid is not None and process_gone(server.pid)


def test_exit_before_healthy_is_a_start_error_with_exit_code(tmp_path: Path) -> None:
    port = free_port()
    with pytest.raises(ServerStartError) as caught, managed(tmp_path, port, "--exit-at-start", "7") as server:
        server.wait_healthy()
    assert "exited with code 7" in str(caught.value)
    assert "exiting with 7 at start" in str(caught.value)


def test_crash_while_running_is_detected_and_cleaned_up(tmp_path: Path) -> None:
    port = free_port()
    child_file = tmp_path / "child.pid"
    server = managed(tmp_path, port, "--crash-after", "0", "--child-pid-file", str(child_file))
    with pytest.raises(ServerCrashedError) as caught, server:
        server.wait_healthy()
        assert wait_until(child_file.exists)
        import urllib.request

        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/completions", data=b"{}", headers={"Content-Length": "2"}
        )
        with pytest.raises(OSError):
            urllib.request.urlopen(request, timeout=5)
        assert wait_until(lambda: server._require_process().poll() is not None)
        server.check_alive()
    assert "exited with code 3" in str(caught.value)
    assert "crashing mid-run" in str(caught.value)
    # The leader died on its own; its forked child must still be killed with the group.
    assert wait_until(lambda: process_gone(int(child_file.read_text())), 5)


def test_sigterm_ignored_escalates_to_sigkill(tmp_path: Path) -> None:
    port = free_port()
    server = managed(tmp_path, port, "--ignore-sigterm", stop_grace_s=0.5)
    server.start()
    server.wait_healthy()
    started = time.monotonic()
    code = server.stop()
    assert code == -signal.SIGKILL
    # The grace, then SIGKILL at once; broken (no escalation), stop() waits on a server that ignores SIGTERM.
    assert time.monotonic() - started < 0.5 + LOADED_MACHINE_S
    assert server.pid is not None and process_gone(server.pid)


def test_ctrl_c_in_the_caller_stops_the_server(tmp_path: Path) -> None:
    """A real caller process gets SIGINT while it waits for /health; no process may be left."""
    port = free_port()
    child_file, leader_file = tmp_path / "child.pid", tmp_path / "leader.pid"
    script = f"""
import signal, sys
# A shell starts background jobs with SIGINT ignored, and Python keeps it ignored then; a
# user's Ctrl-C always reaches the real CLI, so give this caller the default handler back.
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
from release.gsm8k.server import ManagedServer
server = ManagedServer({fake_server_argv(port, "--healthy-after", "60", "--child-pid-file", str(child_file))!r},
    base_url="http://127.0.0.1:{port}", log_path=Path({str(tmp_path / "s.log")!r}),
    health_timeout_s=60, poll_interval_s=0.05, stop_grace_s=5)
try:
    with server:
        Path({str(leader_file)!r}).write_text(str(server.pid))
        server.wait_healthy()
except KeyboardInterrupt:
    sys.exit(130)
"""
    import subprocess

    # The caller imports `release` from this checkout, as `python -m release` run from it would.
    caller = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert wait_until(lambda: leader_file.exists() and child_file.exists(), 10)
        os.kill(caller.pid, signal.SIGINT)
        assert caller.wait(timeout=15) == 130
    finally:
        if caller.poll() is None:
            caller.kill()
    assert process_gone(int(leader_file.read_text()))
    assert wait_until(lambda: process_gone(int(child_file.read_text())), 5)


def test_fake_server_is_a_labelled_test_double() -> None:
    assert "TEST DOUBLE" in FAKE_SERVER.read_text().split('"""')[1]
