"""The doctor's parts on their own, and the script in this test environment (fast, no fresh venv).

The fresh-venv verdicts (affected, fixed and live, switched off, fixed upstream, newer than the
data) are in test_doctor_venvs.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO, alive
from helpers.doctor import (
    FIXTURE_SCAN,
    SCHEMA,
    SCRIPT,
    doctor_module,
    heavy,
    imported,
    scan_data,
    scan_file,
    scan_records,
    validate,
)
from helpers.failure import failed
from release.core.errors import DoctorError
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.outcome import PatchStatus

doctor = doctor_module()
TWO, ONE = doctor.CLASSES
to_json = doctor.records.to_json


def test_schema_is_a_valid_schema_and_knows_every_verdict_and_exit_code() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert set(schema["properties"]["verdict"]["enum"]) == set(doctor.EXIT_CODES)
    assert set(schema["properties"]["exit_code"]["enum"]) == set(doctor.EXIT_CODES.values()) == {0, 1, 2}
    # The schema's verdict -> exit code rules say what doctor.EXIT_CODES says.
    for rule in schema["allOf"]:
        condition = rule["if"]["properties"]["verdict"]
        verdicts = condition.get("enum", [condition.get("const")])
        assert {doctor.EXIT_CODES[v] for v in verdicts} == {rule["then"]["properties"]["exit_code"]["const"]}


def test_the_schema_takes_every_patch_status_the_scan_data_may_hold() -> None:
    """The doctor copies release.patches from the scan data, whose words are PatchStatus's."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    words = schema["properties"]["release"]["properties"]["patches"]["additionalProperties"]["enum"]
    assert sorted(words) == sorted(status.value for status in PatchStatus)


def test_the_fixture_has_the_scan_schema_shape() -> None:
    read, problem = doctor.load_scan(FIXTURE_SCAN)
    assert problem is None and read is not None and read.scanned[-1] == read.newest_scanned
    data = json.loads(FIXTURE_SCAN.read_text(encoding="utf-8"))
    assert data["scanned"][-1] == data["newest_scanned"] and data["fixed_in"] in data["scanned"]
    for version, entry in data["releases"].items():
        assert version in data["scanned"]
        assert entry["status"] in ("affected", "fixed", "not-affected")
        assert set(entry["patches"]) <= set(data["patches"])


# ------------------------------------------------------------------------- `vllm serve` command lines


@pytest.mark.parametrize(
    "argv, uses, ep_size",
    [
        ("vllm serve m --all2all-backend flashinfer_nvlink_two_sided -dp 2 -ep", TWO, 2),
        (
            "m --all2all-backend=flashinfer_nvlink_one_sided --data-parallel-size=4 --enable-expert-parallel -tp 2",
            ONE,
            8,
        ),
        ("--all2all_backend flashinfer_all2allv --data_parallel_size 2 --enable_expert_parallel", TWO, 2),
        ("-dp 2 -ep -pcp 2 --all2all-backend flashinfer_nvlink_two_sided", TWO, 4),
        # Tensor parallel alone never builds the all-to-all classes (use_all2all_kernels needs DP > 1 and EP).
        ("m -tp 8 --all2all-backend flashinfer_nvlink_two_sided", None, 1),
        ("m -tp 8 -ep --all2all-backend flashinfer_nvlink_two_sided", None, 8),
        ("m -dp 2 --all2all-backend flashinfer_nvlink_two_sided", None, 1),
        ("m -dp 2 -ep --no-enable-expert-parallel --all2all-backend flashinfer_nvlink_two_sided", None, 1),
        ("m -dp 2 -ep", None, 2),
        ("m -dp 2 -ep --all2all-backend deepep_low_latency", None, 2),
    ],
)
def test_serve_layout(argv: str, uses: str | None, ep_size: int) -> None:
    layout = to_json(doctor.serve_layout(argv.split(), {}))
    assert layout["uses_affected_class"] == uses
    # The second all-reduce runs over the TP group: with tensor parallel 1 it is the identity.
    assert layout["reduce_runs"] is (uses is not None and layout["tensor_parallel_size"] > 1)
    assert layout["ep_size"] == ep_size
    assert layout["conclusive"] is True


def test_a_config_file_makes_the_command_line_inconclusive() -> None:
    layout = to_json(doctor.serve_layout(["m", "--config", "serve.yaml", "-tp", "2"], {}))
    assert layout["conclusive"] is False and layout["reduce_runs"] is False
    assert "--config" in layout["notes"][0]


@pytest.mark.parametrize(
    "argv",
    [
        "m --all2all-backend flashinfer_nvlink_two_sided -dp 2 -ep",
        "m --all2all-backend=flashinfer_nvlink_one_sided --data-parallel-size=4 --enable-expert-parallel -tp 2",
        "m --all2all_backend flashinfer_all2allv --data_parallel_size 2 --enable_expert_parallel",
        "m -tp 8 -ep --all2all-backend flashinfer_nvlink_two_sided",
        "m -tp 2 -dp 2 --all2all-backend flashinfer_nvlink_two_sided",
        "m -dp 2 --all2all-backend flashinfer_nvlink_one_sided",
        "m -dp 4 -ep",
        "m -dp 4 -ep --all2all-backend deepep_high_throughput",
    ],
)
def test_serve_layout_agrees_with_vllms_moe_parallel_config(argv: str) -> None:
    """vLLM's real FusedMoEParallelConfig, given the sizes its make() derives from the command line,
    decides whether an NVLink class is built and whether the runner's final reduce runs."""
    import dataclasses

    from vllm.model_executor.layers.fused_moe.config import FusedMoEParallelConfig

    installed = metadata.version("vllm")
    facts = doctor.serve_facts(scan_records(), scan_data()["releases"][installed]["line"], installed)
    ours = to_json(doctor.serve_layout(argv.split(), {}, facts))
    tp, dp = ours["tensor_parallel_size"], ours["data_parallel_size"]
    use_ep = tp * dp > 1 and ours["expert_parallel"]  # FusedMoEParallelConfig.make, PCP 1
    fields: dict[str, Any] = {f.name: 0 for f in dataclasses.fields(FusedMoEParallelConfig)}
    fields.update({name: False for name in fields if name.startswith("enable_")})
    fields.update(
        tp_size=1 if use_ep else tp * dp,
        dp_size=dp,
        pcp_size=1,
        ep_size=tp * dp if use_ep else 1,
        sp_size=1,
        use_ep=use_ep,
        all2all_backend=ours["all2all_backend"],
    )
    config = FusedMoEParallelConfig(**fields)
    built = TWO if config.use_fi_nvl_two_sided_kernels else ONE if config.use_fi_nvl_one_sided_kernels else None
    assert ours["uses_affected_class"] == built
    if built:
        # MoERunner._maybe_reduce_final_output: not sequence parallel and (tp > 1 or ep > 1).
        assert not config.is_sequence_parallel and (config.tp_size > 1 or config.ep_size > 1)
        assert ours["ep_size"] == config.ep_size


# ------------------------------------------------------------------------- scan data


def _facts(version: str | None, data: dict[str, Any] | None = None) -> dict[str, Any]:
    facts: dict[str, Any] = to_json(doctor.release_facts(scan_records(data), None, version))
    return facts


def test_release_facts_come_from_the_scan_data() -> None:
    data = scan_data()
    for version, entry in data["releases"].items():
        facts = _facts(version)
        assert facts["status"] == entry["status"] and facts["in_train"] == entry["in_train"]
        assert facts["fixed_in"] == data["fixed_in"]
    affected = next(v for v, e in data["releases"].items() if e["status"] == "affected")
    # vLLM's own local builds (+cu129) are the release's source.
    assert _facts(affected + "+cu129")["status"] == "affected"


def test_live_reads_the_module_and_classes_of_each_release_line_from_the_scan_data() -> None:
    data = scan_data()
    lines = read_lines(Layout.default().lines)
    assert set(data["lines"]) == {line.name for line in lines.lines}
    for line in lines.lines:
        assert line.live_module and line.live_classes, f"patches/lines.toml: line {line.name} has no `live`"
        assert doctor.live_target(scan_records(data), line.name) == (line.live_module, line.live_classes)
    # A release on no line, or scan data without the table: the head line's NVLink classes.
    fallback = (doctor.ALL2ALL_MODULE, doctor.CLASSES)
    assert doctor.live_target(scan_records(data), None) == fallback
    assert doctor.live_target(scan_records({**data, "lines": {}}), lines.lines[-1].name) == fallback
    assert doctor.live_target(None, lines.lines[-1].name) == fallback


def test_output_is_reduced_is_read_as_vllms_factory_builds_the_class_under_data_parallel() -> None:
    class AnswersFromUseDp:  # the 0.11-0.15 all-to-all class: True only when built with use_dp
        use_dp: bool  # set by the doctor on an instance made without __init__

        def __init__(self, use_dp: bool) -> None:
            raise AssertionError("__init__ needs a GPU group; the doctor must not call it")

        def output_is_reduced(self) -> bool:
            return bool(self.use_dp)

    class Constant:
        def __init__(self, manager: object) -> None:
            raise AssertionError("never called")

        def output_is_reduced(self) -> bool:
            return False

    assert doctor.reduced_as_built(AnswersFromUseDp) is True
    assert doctor.reduced_as_built(Constant) is False


def test_release_facts_never_guess_outside_the_data() -> None:
    data = scan_data()
    newest, oldest = data["newest_scanned"], data["scanned"][0]
    newer = _facts(newest.rsplit(".", 1)[0] + ".999")
    assert newer["status"] == "unknown" and f"newer than the newest release in the scan data ({newest})" in newer["why"]
    older = _facts("0.0.1")
    assert older["status"] == "unknown" and f"older than the oldest release in the scan data ({oldest})" in older["why"]
    dev = _facts(data["scanned"][-2] + ".dev7+g1234abc")
    assert dev["status"] == "unknown" and "not a release in the scan data" in dev["why"]
    assert _facts(None)["status"] == "unknown"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("{", "is not JSON"),
        ('{"schema": 2, "scanned": [], "releases": {}}', "has schema 2"),
        ('{"schema": 1}', "no 'releases' table"),
        ("[]", "has schema 'list'"),
    ],
)
def test_bad_scan_data_is_a_reason_not_a_crash(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "scan.json"
    path.write_text(text, encoding="utf-8")
    data, found = doctor.load_scan(path)
    assert data is None and found is not None and problem in found


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "deep"])
def test_scan_data_that_is_no_file_or_too_deep_is_a_reason_not_a_hang(tmp_path: Path, kind: str) -> None:
    """`doctor --scan F` run as the overlay's own script: a FIFO, /dev/zero and a nesting thousands deep are
    each a reason the report gives, never a hang, a MemoryError or a RecursionError."""
    path = tmp_path / "scan.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_text("[" * 5000 + "]" * 5000, encoding="utf-8")
    data, found = doctor.load_scan(path)
    assert data is None and found is not None, found
    assert ("not a regular file" in found) if kind != "deep" else ("nested too deeply" in found), found


# ------------------------------------------------------------------------- the script, here


def _script(
    *args: str, env: dict[str, str] | None = None, python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}, cwd=REPO
    )


def test_the_script_imports_neither_torch_nor_vllm_and_reports_what_the_data_says() -> None:
    proc = _script("-X", "importtime", str(SCRIPT), "--json", "--scan", str(scan_file()))
    assert not heavy(imported(proc.stderr)), sorted(heavy(imported(proc.stderr)))
    assert "json" in imported(proc.stderr)  # the reader of -X importtime works
    report = validate(json.loads(proc.stdout))
    installed = metadata.version("vllm")
    assert report["vllm"]["version"] == installed
    assert report["release"]["status"] == scan_data()["releases"][installed]["status"]
    assert proc.returncode == report["exit_code"] == doctor.EXIT_CODES[report["verdict"]]
    assert report["overlay"]["installed"] is False and report["live"] is None


def test_bad_scan_data_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "scan.json"
    bad.write_text('{"schema": 99}', encoding="utf-8")
    proc = _script(str(SCRIPT), "--json", "--scan", str(bad))
    report = validate(json.loads(proc.stdout))
    assert proc.returncode == 2 and report["verdict"] == "cannot-tell" and "schema 99" in report["summary"]


def test_release_doctor_refuses_what_is_not_an_interpreter(tmp_path: Path) -> None:
    missing = _script("-m", "release", "doctor", "--python", str(tmp_path / "python"))
    error = failed(missing)
    assert missing.returncode == 2 and error.reference == DoctorError.reference and error.hint, missing.stderr
    assert error.message.startswith("--python")
    not_python = _script("-m", "release", "doctor", "--python", "/bin/true")
    assert not_python.returncode == 2 and "gave no doctor report" in not_python.stderr
    assert "Traceback" not in missing.stderr + not_python.stderr


# ------------------------------------------------------------------------- the command line through the CLI


def _installed_choices() -> tuple[str, list[str]]:
    installed = metadata.version("vllm")
    found = doctor.serve_facts(scan_records(), scan_data()["releases"][installed]["line"], installed)
    assert found is not None and found.range is not None, f"the scan data has no serve facts for vLLM {installed}"
    return installed, list(found.range.all2all_backends)


def test_a_backend_the_installed_vllm_does_not_have_is_exit_2_refused() -> None:
    installed, choices = _installed_choices()
    missing = next(b for b in ("flashinfer_nvlink_one_sided", "flashinfer_nvlink_three_sided") if b not in choices)
    argv = ["--", "vllm", "serve", "m", "-tp", "2", "-dp", "2", "-ep", "--all2all-backend", missing]
    proc = _script(str(SCRIPT), "--json", "--scan", str(scan_file()), *argv)
    report = validate(json.loads(proc.stdout))
    assert proc.returncode == 2 and report["verdict"] == "refused", proc.stdout[-2000:]
    assert report["summary"] == (
        f"vLLM {installed} would refuse this command line: --all2all-backend {missing} is not one of "
        + ", ".join(choices)
    )
    text = _script(str(SCRIPT), "--scan", str(scan_file()), *argv)
    assert text.returncode == 2 and f"verdict: refused (exit 2): vLLM {installed} would refuse" in text.stdout


def test_env_sets_the_serve_environment_over_the_processs_own() -> None:
    installed, choices = _installed_choices()
    argv = ["--", "m", "-tp", "2", "-dp", "2", "-ep", "--all2all-backend", "flashinfer_all2allv"]
    if "flashinfer_all2allv" not in choices:
        pytest.skip(f"vLLM {installed} has no flashinfer_all2allv")
    proc = _script(
        str(SCRIPT),
        "--json",
        "--scan",
        str(scan_file()),
        "--env",
        "VLLM_ENABLE_MOE_DP_CHUNK=0",
        *argv,
        env={"VLLM_ALL2ALL_BACKEND": "naive"},
    )
    report = validate(json.loads(proc.stdout))
    assert report["serve"]["environment"]["VLLM_ENABLE_MOE_DP_CHUNK"] == {"value": "0", "from": "--env"}
    assert report["serve"]["environment"]["VLLM_ALL2ALL_BACKEND"] == {"value": "naive", "from": "environment"}
    bad = _script(str(SCRIPT), "--json", "--env", "NOEQUALS", *argv)
    assert bad.returncode == 2 and "--env" in bad.stderr and not bad.stdout


def test_not_used_prints_no_fix() -> None:
    # The verdict follows from the scan data, never from the output: an affected vLLM whose command line runs no
    # all-to-all (TP only) is not-used; one the scan finds unaffected is not-affected. Neither prints a fix.
    installed = metadata.version("vllm")
    affected = scan_data()["releases"][installed]["status"] == "affected"
    proc = _script(str(SCRIPT), "--scan", str(scan_file()), "--", "m", "-tp", "2")
    verdict = "not-used" if affected else "not-affected"
    assert f"verdict: {verdict} (exit 0)" in proc.stdout, proc.stdout[-2000:]
    assert proc.returncode == 0 and "\nfix:" not in proc.stdout, proc.stdout


# ------------------------------------------------------------------------- `release doctor --python`


def test_release_doctor_takes_a_virtual_environments_directory(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    proc = _script("-m", "release", "doctor", "--python", str(venv), "--json", "--scan", str(scan_file()))
    report = validate(json.loads(proc.stdout))
    # That environment's own interpreter answered: no vLLM there, so it cannot tell.
    assert Path(report["python"]).parent.parent == venv and report["vllm"]["version"] is None
    assert proc.returncode == 2 and report["verdict"] == "cannot-tell"
    text = _script("-m", "release", "doctor", "--python", str(venv))
    assert text.returncode == 2 and "verdict: cannot-tell" in text.stdout
    plain = tmp_path / "plain"
    plain.mkdir()
    refused = _script("-m", "release", "doctor", "--python", str(plain))
    assert refused.returncode == 2 and "is a directory without bin/python" in refused.stderr
    assert failed(refused).message.startswith("--python") and "Traceback" not in refused.stderr


def test_release_doctor_stops_an_interpreter_that_hangs(tmp_path: Path) -> None:
    """A real interpreter stand-in that never answers: a shell script that starts a child holding the
    output pipe and waits. --timeout 2 ends it, and the child, with one error line."""
    pid_file = tmp_path / "child.pid"
    hang = tmp_path / "python"
    hang.write_text(f"#!/bin/sh\nsleep 600 &\necho $! > {pid_file}\nwait\n", encoding="utf-8")
    hang.chmod(0o755)
    started = time.monotonic()
    proc = _script("-m", "release", "doctor", "--python", str(hang), "--timeout", "2")
    took = time.monotonic() - started
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = failed(proc, tmp_path)
    assert error.reference == DoctorError.reference and len(proc.stderr.strip().splitlines()) == 2, proc.stderr
    assert error.shown.splitlines()[0] == (
        f"error[{DoctorError.reference}]: [TMP]/python gave no doctor report within [TIME] (--timeout): stopped it"
    )
    assert error.hint and not proc.stdout
    assert took < 60, took
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child), f"the interpreter's child {child} outlived the timeout"
