"""`python -m release gsm8k` end to end on CPU: fake serving envs whose `vllm` is the model-server test double."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import REPO
from helpers.failure import failed
from helpers.gsm8k import fake_overlay_version, make_fake_serving_env
from release.core.errors import (
    EXIT_BELOW_THRESHOLD,
    EXIT_INFRASTRUCTURE,
    BadInputError,
    DataNotFoundError,
    NoGpuError,
    ServerStartError,
)
from release.core.layout import Layout
from release.gsm8k import cli, lm_eval_runner, smoke, venvs

pytestmark = pytest.mark.timeout(60)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(list(argv))


def common(tiny_data: Path, report: Path, *extra: str) -> list[str]:
    return [
        "--model", "tiny-model", "--backend", "flashinfer_nvlink_two_sided", "--scorer", "builtin",
        "--data", str(tiny_data), "--report", str(report), "--health-timeout", "20", "--concurrency", "2",
        *extra,
    ]  # fmt: skip


def test_compare_reports_both_runs_and_the_delta(tmp_path: Path, tiny_data: Path) -> None:
    fixed = make_fake_serving_env(tmp_path / "fixed", mode="correct", fix_active=True, data=tiny_data)
    upstream = make_fake_serving_env(
        tmp_path / "upstream", mode="alternate", fix_active=False, data=tiny_data, overlay_version=None
    )
    report_dir = tmp_path / "report"
    argv = common(
        tiny_data, report_dir, "--compare", "--limit", "4", "--venv", str(fixed), "--upstream-venv", str(upstream)
    )
    code = cli.run(parse(*argv), Layout.default())
    assert code == 0
    report = json.loads((report_dir / "report.json").read_text())
    assert [run["label"] for run in report["runs"]] == ["without-fix", "with-fix"]
    without, with_fix = report["runs"]
    assert without["metrics"]["strict-match"]["value"] == pytest.approx(0.5)  # questions 0 and 2 of 4
    assert with_fix["metrics"]["strict-match"]["value"] == pytest.approx(1.0)
    assert with_fix["metrics"]["flexible-extract"]["n"] == 4
    assert report["delta"]["strict-match"]["delta"] == pytest.approx(0.5)
    assert (without["fix_active"], with_fix["fix_active"]) == (False, True)
    assert with_fix["versions"]["vllm-fused-moe"] == fake_overlay_version()
    assert without["versions"]["vllm-fused-moe"] is None
    argv = with_fix["serve_argv"]
    assert argv[0] == str(fixed / "bin" / "vllm")
    assert argv[argv.index("--all2all-backend") + 1] == "flashinfer_nvlink_two_sided"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert report["passed"] is True and report["limit"] == 4
    markdown = (report_dir / "report.md").read_text()
    assert "**PASS**" in markdown and "| strict-match | +0.5000 |" in markdown
    samples = (report_dir / "samples-with-fix.jsonl").read_text().splitlines()
    assert len(samples) == 4 and json.loads(samples[1])["target"] == "1,234"


def test_below_threshold_exits_one(tmp_path: Path, tiny_data: Path) -> None:
    upstream = make_fake_serving_env(tmp_path / "up", mode="alternate", fix_active=False, data=tiny_data)
    report_dir = tmp_path / "report"
    code = cli.run(
        parse(*common(tiny_data, report_dir, "--without-patches", "--upstream-venv", str(upstream))), Layout.default()
    )
    assert code == EXIT_BELOW_THRESHOLD
    report = json.loads((report_dir / "report.json").read_text())
    assert report["passed"] is False
    assert report["runs"][0]["metrics"]["strict-match"]["value"] == pytest.approx(3 / 5)
    assert "< threshold 0.90" in report["verdict"]


def test_fixed_wheel_without_live_fix_fails_even_when_accurate(tmp_path: Path, tiny_data: Path) -> None:
    fixed = make_fake_serving_env(tmp_path / "fixed", mode="correct", fix_active=False, data=tiny_data)
    code = cli.run(parse(*common(tiny_data, tmp_path / "r", "--venv", str(fixed))), Layout.default())
    assert code == EXIT_BELOW_THRESHOLD
    assert "not active" in json.loads((tmp_path / "r" / "report.json").read_text())["verdict"]


def test_server_that_exits_at_start_is_an_infrastructure_error(tmp_path: Path, tiny_data: Path) -> None:
    fixed = make_fake_serving_env(
        tmp_path / "fixed", mode="correct", fix_active=True, data=tiny_data, extra_env={"FAKE_MODEL_EXIT_AT_START": "1"}
    )
    with pytest.raises(ServerStartError) as caught:
        cli.run(parse(*common(tiny_data, tmp_path / "r", "--venv", str(fixed))), Layout.default())
    assert caught.value.exit_code == EXIT_INFRASTRUCTURE
    assert (tmp_path / "r" / "server-with-fix.log").is_file()


def test_server_env_reaches_vllm_serve(tmp_path: Path, tiny_data: Path) -> None:
    """--server-env is in the environment `vllm serve` starts with: here it makes the double exit at start."""
    fixed = make_fake_serving_env(tmp_path / "fixed", mode="correct", fix_active=True, data=tiny_data)
    argv = common(tiny_data, tmp_path / "ok", "--venv", str(fixed), "--server-env", "VLLM_ENABLE_MOE_DP_CHUNK=0")
    assert cli.run(parse(*argv), Layout.default()) == 0
    argv = common(tiny_data, tmp_path / "r", "--venv", str(fixed), "--server-env", "FAKE_MODEL_EXIT_AT_START=1")
    with pytest.raises(ServerStartError):
        cli.run(parse(*argv), Layout.default())


def test_the_older_backend_name_is_served_and_its_fix_read(tmp_path: Path, tiny_data: Path) -> None:
    """`flashinfer_all2allv` (vLLM 0.11.1-0.17.1, an alias of two-sided later) is passed through, and the
    probe finds its class (here the stub's two-sided one, as in a 0.18+ release)."""
    fixed = make_fake_serving_env(tmp_path / "fixed", mode="correct", fix_active=True, data=tiny_data)
    argv = common(tiny_data, tmp_path / "r", "--venv", str(fixed))
    argv[argv.index("flashinfer_nvlink_two_sided")] = "flashinfer_all2allv"
    assert cli.run(parse(*argv), Layout.default()) == 0
    run = json.loads((tmp_path / "r" / "report.json").read_text())["runs"][0]
    assert run["fix_active"] is True
    assert run["serve_argv"][run["serve_argv"].index("--all2all-backend") + 1] == "flashinfer_all2allv"


# Each case on an otherwise valid command line (a serving venv given, so no --index is needed): only the case's
# own check can refuse it, and the error says which option was wrong.
BAD_INPUT = [
    (("--threshold", "1.5"), "--threshold is an exact-match fraction in [0, 1]"),
    (("--limit", "0"), "--limit must be at least 1"),
    (("--venv", "/nonexistent/env"), "--venv /nonexistent/env is not a virtual environment (no bin/python)"),
    (("--index", "/nonexistent/index"), "--index /nonexistent/index has no simple/ directory"),
    (("--server-env", "VLLM_ENABLE_MOE_DP_CHUNK"), "--server-env 'VLLM_ENABLE_MOE_DP_CHUNK' is not NAME=VALUE"),
    (("--server-env", "1X=0"), "--server-env '1X=0' is not NAME=VALUE"),
]


@pytest.fixture
def serving(tmp_path: Path, tiny_data: Path) -> Path:
    return make_fake_serving_env(tmp_path / "fixed", mode="correct", fix_active=True, data=tiny_data)


@pytest.mark.parametrize("extra, said", BAD_INPUT, ids=[" ".join(extra) for extra, _ in BAD_INPUT])
def test_bad_input_is_exit_two(
    tmp_path: Path, tiny_data: Path, serving: Path, extra: tuple[str, ...], said: str
) -> None:
    venv = [] if extra[0] in ("--venv", "--index") else ["--venv", str(serving)]
    with pytest.raises(BadInputError) as caught:
        cli.run(parse(*common(tiny_data, tmp_path / "r", *venv, *extra)), Layout.default())
    assert caught.value.exit_code == 2 and str(caught.value) == said, caught.value
    assert not (tmp_path / "r" / "report.json").exists()  # refused before anything ran


def test_missing_data_dir_is_bad_input(tmp_path: Path, tiny_data: Path, serving: Path) -> None:
    args = parse(*common(tiny_data, tmp_path / "r", "--venv", str(serving)))
    args.data = tmp_path / "nowhere"
    with pytest.raises(DataNotFoundError) as caught:
        cli.run(args, Layout.default())
    assert caught.value.exit_code == 2 and str(tmp_path / "nowhere") in str(caught.value), caught.value


def test_auto_scorer_choice(monkeypatch: pytest.MonkeyPatch, tiny_data: Path) -> None:
    monkeypatch.setattr(lm_eval_runner, "lm_eval_command", lambda: None)
    assert smoke.choose_scorer("auto", tiny_data) == "builtin"
    with pytest.raises(BadInputError):
        smoke.choose_scorer("auto", None)
    monkeypatch.setattr(lm_eval_runner, "lm_eval_command", lambda: ["lm_eval"])
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    assert smoke.choose_scorer("auto", tiny_data) == "lm-eval"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert smoke.choose_scorer("auto", tiny_data) == "builtin"


def test_module_entry_point_help_lists_exit_codes() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "release.gsm8k", "--help"], cwd=REPO, capture_output=True, text=True, timeout=30
    )
    assert completed.returncode == 0
    for text in ("--compare", "--without-patches", "exit codes:", "130", "--threshold"):
        assert text in completed.stdout


def test_sigterm_to_the_cli_stops_the_server_and_exits_130(tmp_path: Path, tiny_data: Path) -> None:
    import os
    import signal

    from helpers.gsm8k import process_gone, wait_until

    child_file, argv_file = tmp_path / "child.pid", tmp_path / "argv.json"
    fixed = make_fake_serving_env(
        tmp_path / "fixed", mode="correct", fix_active=True, data=tiny_data,
        extra_env={"FAKE_MODEL_HEALTHY_AFTER": "120", "FAKE_MODEL_CHILD_PID_FILE": str(child_file),
                   "FAKE_MODEL_ARGV_FILE": str(argv_file)},
    )  # fmt: skip
    caller = subprocess.Popen(
        [sys.executable, "-m", "release.gsm8k", *common(tiny_data, tmp_path / "r", "--venv", str(fixed))],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(child_file.exists, 20), "the fake server never started"
        os.kill(caller.pid, signal.SIGTERM)
        _, stderr = caller.communicate(timeout=20)
    finally:
        if caller.poll() is None:
            caller.kill()
    assert caller.returncode == 130, stderr
    assert "interrupted" in stderr and "starting" in stderr  # progress went to stderr
    assert wait_until(lambda: process_gone(int(child_file.read_text())), 5)
    served = json.loads(argv_file.read_text())
    assert served[:2] == ["serve", "tiny-model"] and "--enable-expert-parallel" in served


# ------------------------------------------------------------------ no GPU: refused before installing


def no_gpu_path(tmp_path: Path, nvidia_smi: str | None) -> str:
    """A PATH with the interpreter's folder and, where given, an `nvidia-smi` script (the driver's stand-in)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if nvidia_smi is not None:
        script = bin_dir / "nvidia-smi"
        script.write_text(f"#!/bin/sh\n{nvidia_smi}\n")
        script.chmod(0o755)
    return os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent)])


@pytest.mark.parametrize(
    ("nvidia_smi", "says"),
    [
        (None, "no NVIDIA GPU here: `nvidia-smi` is not on PATH; nothing was installed"),
        (
            'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."; exit 9',
            "no NVIDIA GPU here: `nvidia-smi -L` exited 9 (NVIDIA-SMI has failed because it couldn't "
            "communicate with the NVIDIA driver.); nothing was installed",
        ),
    ],
    ids=["no-nvidia-smi", "no-driver"],
)
def test_without_a_gpu_it_refuses_before_installing_anything(
    tmp_path: Path, tiny_data: Path, nvidia_smi: str | None, says: str
) -> None:
    work, report = tmp_path / "work", tmp_path / "report"
    index = tmp_path / "index"
    (index / "simple").mkdir(parents=True)
    argv = [sys.executable, "-m", "release", "gsm8k", *common(tiny_data, report, "--index", str(index))]
    env = {**os.environ, "PATH": no_gpu_path(tmp_path, nvidia_smi)}
    started = time.monotonic()
    result = subprocess.run(
        [*argv, "--work-dir", str(work)], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr
    error = failed(result)
    # What `nvidia-smi` said is the point: the operator sees why there is no GPU.
    assert error.reference == NoGpuError.reference and error.message == says, result.stderr
    assert "nvidia-smi -L" in error.hint, result.stderr
    assert not work.exists() and not report.exists()  # no venv, no report: nothing was installed or written
    assert time.monotonic() - started < 30


def test_a_prepared_venv_needs_no_gpu_check(tmp_path: Path, tiny_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # --venv and --upstream-venv install nothing; the model-server double serves on CPU.
    monkeypatch.setenv("PATH", no_gpu_path(tmp_path, None))
    upstream = make_fake_serving_env(tmp_path / "up", mode="correct", fix_active=False, data=tiny_data)
    argv = common(tiny_data, tmp_path / "report", "--without-patches", "--upstream-venv", str(upstream))
    assert cli.run(parse(*argv), Layout.default()) == 0


def test_a_long_install_says_it_is_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(venvs, "PROGRESS_INTERVAL_S", 0.2)
    log = tmp_path / "install.log"
    venvs._run_logged([sys.executable, "-c", "import time; time.sleep(1)"], log, 30.0, "installing vllm==X")
    still = [line for line in capsys.readouterr().err.splitlines() if "installing vllm==X: still running after" in line]
    assert len(still) >= 2 and f"(log: {log})" in still[0], still
