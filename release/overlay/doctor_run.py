"""`doctor --python PYTHON`: run this checkout's doctor script under another interpreter, print its report.

The script (release/overlay/runtime/vllm_fused_moe/doctor.py, standard library only) runs as a
process in its own session, bounded by the timeout; its JSON report is read back from stdout past
whatever that environment's start-up printed, and printed as JSON or as the doctor's text.
"""

from __future__ import annotations

import collections
import ctypes
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from release.core import flags, log
from release.core.errors import DoctorError
from release.core.files import TEXT_LIMIT, read_regular
from release.core.layout import Layout
from release.core.text import escaped

SCRIPT = "doctor.py"
# A plain run takes well under a second; anything past this is an interpreter that hangs (a sitecustomize
# waiting on the network, a lock).
DEFAULT_TIMEOUT = 120.0
# --live takes 8-20 s warm, and 47-153 s measured the first time after an install (vLLM's import compiles its
# bytecode; docs/doctor.md "Cost"): its default leaves room for that on a loaded machine.
LIVE_TIMEOUT = 300.0
MAX_TIMEOUT = 86400.0  # a day: longer is no deadline, and inf or 1e300 overflow the waits of subprocess
STDERR_KEPT = 1 << 20  # of the child's stderr, its last bytes: vLLM's import logs are kilobytes
# Where a virtual environment keeps its interpreter (venv: bin/ on POSIX, Scripts\ on Windows).
VENV_INTERPRETERS = ("bin/python", "bin/python3", "Scripts/python.exe")


@dataclass(frozen=True)
class DoctorOptions:
    """What `doctor` was asked (its options, one field each)."""

    python: Path  # the interpreter, or its virtual environment's directory
    timeout: float | None = None  # seconds before it and its process group are stopped (None: the default)
    json: bool = False  # print the report as JSON
    live: bool = False  # import vLLM's classes there and read output_is_reduced()
    scan: Path | None = None  # scan data (default: this checkout's affected-releases.json)
    index_url: str | None = None  # our package index, for the fix command
    evidence_key: str | None = None  # the pinned key that verifies the signed evidence (issue 47)
    env: tuple[str, ...] = ()  # NAME=VALUE pairs `vllm serve` runs with
    serve: tuple[str, ...] = ()  # a `vllm serve` command line


def interpreter(given: Path) -> Path:
    """`given` itself, or the interpreter of the virtual environment `given` is the directory of."""
    if given.is_dir():
        found = next((given / name for name in VENV_INTERPRETERS if (given / name).is_file()), None)
        if found is None:
            raise DoctorError(
                f"--python {given} is a directory without {' or '.join(VENV_INTERPRETERS)}: not a virtual environment"
            )
        given = found
    if not given.is_file() or not os.access(given, os.X_OK):
        raise DoctorError(f"--python {given} is not an executable file")
    return given


def command(options: DoctorOptions, layout: Layout, python: Path | None = None) -> list[str]:
    script = layout.runtime_package / SCRIPT
    scan = options.scan if options.scan is not None else layout.affected_json
    argv = [str(python or options.python), str(script), flags.JSON]
    if options.scan is not None or scan.is_file():
        argv += ["--scan", str(scan.resolve())]
    if options.live:
        argv.append("--live")
    if options.index_url:
        argv += ["--index-url", options.index_url]
    if options.evidence_key:
        argv += ["--evidence-key", options.evidence_key]
    for pair in options.env:
        argv += ["--env", pair]
    if options.serve:
        argv += ["--", *options.serve]
    return argv


def doctor(layout: Layout, options: DoctorOptions) -> int:
    timeout = options.timeout if options.timeout is not None else LIVE_TIMEOUT if options.live else DEFAULT_TIMEOUT
    if not 0 < timeout <= MAX_TIMEOUT:  # inf, 1e300: no wait the process machinery can take
        raise DoctorError(f"--timeout {timeout:g} is not a number of seconds in (0, {MAX_TIMEOUT:g}]")
    bad = [pair for pair in options.env if not pair.partition("=")[0] or "=" not in pair]
    if bad:
        raise DoctorError(f"--env {bad[0]!r} is not NAME=VALUE")
    if options.scan is not None:  # a FIFO or /dev/zero is refused here, before the doctor's process reads it
        read_regular(options.scan, TEXT_LIMIT, error=DoctorError, what="--scan: ")
    script = _doctor_module(layout)  # formats the report; its rule for an index URL, and its redaction
    if options.index_url and (problem := script.reading.url_problem(options.index_url)):
        raise DoctorError(f"--index-url {script.reading.shown(options.index_url)} is no index URL: {problem}")
    python = interpreter(options.python)
    returncode, stdout, stderr = _run_bounded(command(options, layout, python), timeout, python)
    found = report_in(stdout)
    if found is None:
        # Its traceback is not printed above the error (it would read as ours): its last line is in it.
        said = escaped(stdout.strip()[-500:]) or "no output"
        ended = _last_line(stderr)
        raise DoctorError(
            f"{python} gave no doctor report (exit {returncode}): {said}"
            + (f"; its stderr ended: {ended}" if ended else "")
        )
    if stderr.strip():  # vLLM's own log lines of --live, or what that environment says at start-up
        sys.stderr.write(escaped(stderr, keep="\n\t"))
        sys.stderr.flush()
    data, text, noise = found
    code = int(data["exit_code"])
    if noise.strip():
        log.warn(
            f"warning: {python} printed on stdout beside the doctor's report (a .pth or sitecustomize of that "
            f"environment?), left out of it: {noise.strip()[-500:]}"
        )
    if options.json:
        log.out(text, end="")
    else:
        log.out(script.format_report(script.report_from_json(data)))
    return code


def report_in(stdout: str) -> tuple[dict[str, Any], str, str] | None:
    """(the report, its text, what else was printed) from the doctor's stdout, or None without a report.

    The doctor prints one JSON object (`--json`, indented, so it starts on a line of its own); whatever
    that interpreter's start-up printed to stdout (a .pth, a sitecustomize) is around it, not in it."""
    decoder = json.JSONDecoder()
    starts = [0] if stdout.startswith("{") else []
    starts += [i + 1 for i, c in enumerate(stdout) if c == "\n" and stdout.startswith("{", i + 1)]
    for start in reversed(starts):  # the report is printed last: the last object that is one
        try:
            data, end = decoder.raw_decode(stdout, start)
        except (ValueError, RecursionError):  # a hostile interpreter's deeply nested output
            continue
        if isinstance(data, dict) and isinstance(data.get("exit_code"), int) and "verdict" in data:
            text = stdout[start:end] + "\n"
            return data, text, stdout[:start] + stdout[end:].lstrip("\n")
    return None


class _Stderr:
    """The child's stderr, read line by line in a thread: the doctor's own progress lines (`doctor: `) are
    passed on at once, escaped; the rest (vLLM's log lines, or a traceback of a child that broke) is kept,
    its last STDERR_KEPT bytes, for after the run: printed beside a report, summed up in the error without one."""

    def __init__(self, stream: IO[str]) -> None:
        self.kept: collections.deque[str] = collections.deque()
        self.size = 0
        self.thread = threading.Thread(target=self._read, args=(stream,), name="doctor-stderr", daemon=True)
        self.thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            if line.startswith("doctor: "):
                sys.stderr.write(escaped(line.rstrip("\n")) + "\n")
                sys.stderr.flush()
                continue
            self.kept.append(line)
            self.size += len(line)
            while self.size > STDERR_KEPT and len(self.kept) > 1:
                self.size -= len(self.kept.popleft())

    def text(self) -> str:
        self.thread.join(timeout=5)  # a grandchild that left the group could hold the pipe open: not forever
        return "".join(self.kept)


def _last_line(text: str) -> str:
    """The last line of what a child printed, escaped: what a traceback ends with (the exception)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return escaped(lines[-1].strip()[-300:]) if lines else ""


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent() -> None:
    """In the child, before it runs the interpreter (Linux): SIGKILL when the process that started it dies.

    Its own session keeps it out of reach of the terminal's signals, so a `release doctor` killed (SIGKILL,
    an OOM kill) left it running, and one that hangs ran forever (docs/guarantees.md, "Leftovers"). The
    standard library has no prctl; ctypes calls libc's, as documented by prctl(2)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _run_bounded(argv: list[str], timeout: float, python: Path) -> tuple[int, str, str]:
    """Run the doctor script; past `timeout`, kill it and whatever it started (its own session), exit 2.

    subprocess.run(timeout=...) kills only the child and then waits for the pipe to close, which a
    grandchild holding it open never does: the process group goes, then the pipe closes.
    Returns (exit status, stdout, stderr less the doctor's progress lines, which went on as they came).
    """
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
        preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # it calls prctl only: no lock taken
    )
    assert proc.stderr is not None
    stderr, proc.stderr = _Stderr(proc.stderr), None  # read by its thread, not by communicate()
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        _reap(proc)
        stderr.text()
        raise DoctorError(
            f"{python} gave no doctor report within {timeout:g} s (--timeout): stopped it",
            hint="an interpreter that hangs at start-up (a sitecustomize or .pth waiting on something?); "
            "run it with release/overlay/runtime/vllm_fused_moe/doctor.py by hand, or give a longer --timeout",
        ) from None
    except BaseException:
        _kill_group(proc)
        _reap(proc)
        raise
    return proc.returncode, stdout, stderr.text()


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):  # gone already; no killpg (Windows)
        proc.kill()


def _reap(proc: subprocess.Popen[str]) -> None:
    """Wait for the killed child; a grandchild that left the group could hold the pipe open: not forever."""
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()


def _doctor_module(layout: Layout) -> Any:
    """The same doctor.py, loaded by path here only to format its report (it is standard library only,
    and loads its parts, _doctor/ beside it, by path too)."""
    spec = importlib.util.spec_from_file_location("vllm_fused_moe_doctor_script", layout.runtime_package / SCRIPT)
    if spec is None or spec.loader is None:
        raise DoctorError(f"cannot load {layout.runtime_package / SCRIPT}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
