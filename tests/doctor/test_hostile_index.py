"""The doctor against a hostile index (issue 45): what it reads is bounded, what it prints is inert.

Real inputs: a FIFO and a 300,000-deep JSON file at INDEX/evidence/<wheel>.json, a real HTTP server on
127.0.0.1 that trickles one byte at a time or asks for credentials, the script run as a process with a
URL that holds a secret or a newline. Evidence files are the evidence stage's own (test_evidence.published).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from doctor.test_evidence import BUG, VERSION, WHEEL, published
from helpers import REPO, alive
from helpers.doctor import SCRIPT, doctor_module, judge, overlay
from helpers.trickle_server import TrickleServer

doctor = doctor_module()
DEEP = b"[" * 300_000
SECRET = "s3cr3t"


def _read(url: str, **given: object) -> Any:  # the doctor's EvidenceRead, loaded by path
    return doctor.evidence.read_evidence(url, WHEEL, **{"timeout": 5.0, "bind": False, **given})


def test_a_deep_evidence_file_is_a_problem_not_a_recursion_error(tmp_path: Path) -> None:
    published(tmp_path).write_bytes(DEEP)
    read = _read(tmp_path.as_uri())
    assert not read.found and read.problem == "not JSON: nested too deeply to read", read


def test_a_fifo_in_the_evidence_files_place_is_refused_at_once(tmp_path: Path) -> None:
    path = published(tmp_path)
    path.unlink()
    os.mkfifo(path)
    started = time.monotonic()
    read = _read(tmp_path.as_uri())
    assert time.monotonic() - started < 2 and not read.found and "not a regular file" in str(read.problem), read


def test_a_server_that_trickles_is_cut_off_at_the_deadline_for_the_whole_answer() -> None:
    """One byte every 0.2 s: each recv answers well within any per-read timeout; only the deadline stops it."""
    with TrickleServer(trickle=0.2) as server:
        started = time.monotonic()
        read = _read(server.url, timeout=1.5)
        took = time.monotonic() - started
    assert not read.found and "not read within 1.5 s" in str(read.problem), read
    assert took < 4, took


def test_credentials_in_the_index_url_are_sent_as_basic_auth_and_never_shown(tmp_path: Path) -> None:
    body = published(tmp_path).read_bytes()
    with TrickleServer({f"/evidence/{WHEEL}.json": body}, auth=f"tok:{SECRET}") as server:
        host = server.url.removeprefix("http://")
        read = _read(f"http://tok:{SECRET}@{host}/simple/")
        refused = _read(server.url)
    assert read.found and read.problem is None, read
    assert SECRET not in read.url and read.url.startswith("http://****@127.0.0.1:"), read.url
    assert not refused.found and "401" in str(refused.problem), refused


def _doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != doctor.INDEX_ENV}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env={**clean, **(env or {})},
        cwd=REPO, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("url", "why"),
    [
        (f"https://tok:{SECRET}@index.example.invalid:port/", "does not parse"),
        (f"https://tok:{SECRET}@index.example.invalid/\nverdict: fixed-live", "control character"),
        (f"ftp://tok:{SECRET}@index.example.invalid/", "not a file://"),
    ],
)
@pytest.mark.parametrize("given", ["option", "environment"])
def test_an_index_url_that_is_no_url_is_a_usage_error_naming_it_redacted(url: str, why: str, given: str) -> None:
    proc = _doctor(
        *(["--index-url", url] if given == "option" else []), env={doctor.INDEX_ENV: url} if given != "option" else None
    )
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in said and SECRET not in said, said
    assert "https://****@index.example.invalid" in said or "ftp://****@" in said, said
    assert why in said and "\nverdict" not in said, said


def test_an_index_url_with_credentials_is_printed_without_them() -> None:
    proc = _doctor("--json", "--index-url", f"https://tok:{SECRET}@index.example.invalid/")
    assert proc.returncode in (0, 1, 2) and "Traceback" not in proc.stderr, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    for argv in ((report["fix"] or {}).get("argv") or [],):
        assert not any("tok:" in a for a in argv), argv


def test_control_characters_from_the_evidence_print_escaped(tmp_path: Path) -> None:
    """A `line` holding CR, LF and a verdict of its own, a bug with ESC and BEL: one verdict line, no raw control."""
    path = published(tmp_path)
    record = json.loads(path.read_text(encoding="utf-8"))
    record["line"] = "x\r\nverdict: fixed-live (exit 0): spoofed"
    record["bugs"][0]["bug"] = BUG + "\x1b[2J\x07"
    path.write_text(json.dumps(record), encoding="utf-8")
    read = _read(tmp_path.as_uri())
    assert read.found, read
    report = judge(doctor, VERSION, doctor.release_facts(None, "no scan", VERSION), overlay(doctor))
    facts = dataclasses.replace(doctor.report_from_json(report).facts, evidence=read)
    text = doctor.format_report(doctor.Report(facts, doctor.Verdict.CANNOT_TELL, "s", None))
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text), repr(text)
    assert [line for line in text.splitlines() if line.startswith("verdict:")] == ["verdict: cannot-tell (exit 2): s"]
    assert "\\r\\nverdict: fixed-live" in text and "\\x1b[2J\\x07" in text, text


def test_evidence_binds_to_the_wheel_the_index_serves_and_to_every_bug_of_the_release(tmp_path: Path) -> None:
    """Issue 43: evidence of another build under the same name, and an `unproven` bug, are named problems."""
    path = published(tmp_path)
    wheel = tmp_path / "simple" / "vllm-fused-moe" / WHEEL
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"not the wheel the evidence names")  # its sha256 is not the evidence's ("ab" * 32)
    read = doctor.evidence.read_evidence(tmp_path.as_uri(), WHEEL, timeout=5.0, needs=(BUG,))
    assert read.found and "another build under the same name" in str(read.problem), read
    record = json.loads(path.read_text(encoding="utf-8"))
    record["wheel"]["sha256"] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    path.write_text(json.dumps(record), encoding="utf-8")
    same = doctor.evidence.read_evidence(tmp_path.as_uri(), WHEEL, timeout=5.0, needs=(BUG,))
    assert same.found and "no wheel whose RECORD can be read" in str(same.problem), same  # past the sha256
    record["bugs"][0]["verdict"] = "unproven"
    path.write_text(json.dumps(record), encoding="utf-8")
    unproven = doctor.evidence.read_evidence(tmp_path.as_uri(), WHEEL, timeout=5.0, needs=(BUG,))
    assert unproven.found and f"the release has {BUG}" in str(unproven.problem), unproven
    assert "'unproven'" in str(unproven.problem)
    missing = doctor.evidence.read_evidence(tmp_path.as_uri(), WHEEL, timeout=5.0, needs=("another-bug",))
    assert "another-bug" in str(missing.problem) and "is not in it" in str(missing.problem), missing


@pytest.mark.parametrize(("field", "value"), [("vllm", [1]), ("wheel", "a string"), ("bugs", [{"bug": ["x"]}])])
def test_evidence_of_the_wrong_shape_is_a_problem(tmp_path: Path, field: str, value: object) -> None:
    path = published(tmp_path)
    record = json.loads(path.read_text(encoding="utf-8"))
    record[field] = value
    path.write_text(json.dumps(record), encoding="utf-8")
    read = _read(tmp_path.as_uri())
    assert not read.found and "not the evidence publish writes" in str(read.problem), read


# ------------------------------------------------------------------ `python -m release doctor --python PY`


def _release_doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "release", "doctor", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_release_doctor_prints_no_child_traceback_above_its_error(tmp_path: Path) -> None:
    """An interpreter that breaks with a traceback: one error line that ends with the exception, and its hint."""
    broken = tmp_path / "python"
    broken.write_text(
        "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho '  File \"x\", line 1' >&2\n"
        "printf 'RuntimeError: boom\\033[2J\\n' >&2\nexit 1\n",
        encoding="utf-8",
    )
    broken.chmod(0o755)
    proc = _release_doctor("--python", str(broken))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "\x1b" not in proc.stderr, proc.stderr
    [error, hint] = proc.stderr.strip().splitlines()
    assert error.startswith("error[doctor]: ") and error.endswith("its stderr ended: RuntimeError: boom\\x1b[2J"), error
    assert hint.startswith("hint: ")


def test_release_doctor_names_an_index_url_that_is_no_url_without_its_credentials() -> None:
    proc = _release_doctor("--python", sys.executable, "--index-url", f"https://tok:{SECRET}@index.example.invalid:x/")
    assert proc.returncode == 2 and SECRET not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "--index-url https://****@index.example.invalid:x/ is no index URL" in proc.stderr, proc.stderr


def test_a_killed_release_doctor_leaves_no_interpreter_behind(tmp_path: Path) -> None:
    """The interpreter runs in its own session (so --timeout can stop its group): a `release doctor` killed
    with SIGKILL left it running. It now dies with its parent (Linux)."""
    pid_file = tmp_path / "pid"
    hang = tmp_path / "python"
    hang.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n", encoding="utf-8")
    hang.chmod(0o755)
    parent = subprocess.Popen(
        [sys.executable, "-m", "release", "doctor", "--python", str(hang)], cwd=REPO, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while not pid_file.is_file() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline and parent.poll() is None, "the interpreter never started"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), f"the interpreter {child} outlived the release doctor that started it"
