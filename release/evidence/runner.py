"""One run of a regression test under an interpreter with torch: on a release's pristine tree, or with a wheel.

The tooling's own interpreter has no torch; the interpreter is the release line's proving environment
(release/evidence/envs.py) or the one given (`--python`), with torch and what vLLM imports. vLLM itself
comes from its real release wheel:

- the release's Python tree, read from its real release wheel (the cached one whose sha256 is the
  index's, every member checked against the wheel's RECORD) and extracted once into the wheel cache
  (`<cache>/wheels/<version>/python-<sha256 prefix>/vllm/`); compiled extensions are left out, as
  they load against CUDA builds of torch that a CPU interpreter does not have, and vLLM imports
  without them. Its `.dist-info/METADATA` is extracted beside it (`dist-info-<prefix>/`): the
  overlay's hook reads the installed vLLM's version from it, as in a user's environment;
- pristine: pytest with that tree first on `PYTHONPATH` and our hook off (`VLLM_FUSED_MOE=off`);
- with the wheel: a fresh venv (no pip of its own) whose one `.pth` puts vLLM's tree and then the
  interpreter's own site-packages (torch, pytest, vLLM's import-time packages) on its path, and
  our wheel installed into it by pip `--no-deps` (the environment's pip, run by the venv's own
  interpreter), as a user installs it, so that its `.pth` hook serves our files under vLLM's names
  when the test imports them.

Only a clean fail and a clean pass count (every test case ran, none errored or was skipped); an error,
a skip, an import that fails or no test collected is "error".

Each run is hermetic (docs/guarantees.md, "What a test and a wheel are trusted with"): its environment
is built from an allow-list (no PYTEST_*, PYTHONPATH, PIP_* or tokens; a fresh HOME and TMPDIR), pytest
loads no plugin but the ones named here (PYTEST_DISABLE_PLUGIN_AUTOLOAD: a wheel's `pytest11` entry point
is never loaded), the verdict is what the tool's own plugin reports over an inherited pipe, checked
against the exit status (release/evidence/child/), and a guard process ends every process the run
leaves, when it ends, after RUN_TIMEOUT_S, or when the tool dies. The extracted release tree is checked
against the release wheel's verified members before each use and extracted again where it differs.

This module starts processes (pytest, pip, the venv's interpreter) and is named in the "processes"
import contract for it (pyproject.toml). `upstream-pr` runs its tests here too (upstream_pr/prove.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from release.core import log
from release.core.errors import BadInputError, NoPytestError
from release.core.layout import PROJECT_ROOT
from release.core.parse import parse_json
from release.core.versions import version_of_tag
from release.evidence import forkserver, scratch
from release.pristine import safe
from release.pristine.wheel import Want, cache_dir, lookup, member_content, verified_content

# vLLM registers this marker in its pyproject.toml ("cpu_test: mark test as CPU-only test"); the
# scratch checkout registers it too, so a test marked as vLLM marks CPU tests runs without a warning.
NO_PYTEST = "No module named pytest"  # what `python -m pytest` says where pytest is not installed
PYTEST_INI = "[pytest]\nmarkers =\n    cpu_test: mark test as CPU-only test\n"
# The bound of one pytest run (the guard ends it and all it started, exit 124): importing torch and
# vLLM's MoE modules takes 10-40 s on a loaded 2-core machine (docs/guarantees.md).
RUN_TIMEOUT_S = 240
# The bound of a helper process (a venv, pip installing one small wheel, asking where site-packages is).
HELPER_TIMEOUT_S = 120
PASSED, FAILED, ERROR = "passed", "failed", "error"
CHILD = Path(__file__).with_name("child")
GUARD = CHILD / "vllm_fused_moe_evidence_guard.py"
PLUGIN = "vllm_fused_moe_evidence_report"  # CHILD/<this>.py, named with -p
FD_VAR = "VLLM_FUSED_MOE_EVIDENCE_FD"
OUTCOMES = ("failed", "errors", "skipped", "passed")  # one per test case, from the plugin's reports
TIMED_OUT, ORPHANED = 124, 125  # the guard's own exit codes
# What each fork server imports once (envs/lines.toml's [server] `preload`; none where the tool runs without
# its checkout: the runs are then as slow as processes of their own).
PRELOAD = forkserver.preload(PROJECT_ROOT / "envs" / "lines.toml")
WORK_PREFIX = "vllm-fused-moe-evidence-"
# What a run inherits of the caller's environment; everything else (PYTEST_ADDOPTS, PYTHONPATH, PIP_*,
# tokens, HOME) stays out. The OPENBLAS_* pair works around OpenBLAS builds that crash on some CPUs.
INHERITED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


# ------------------------------------------------------------------ vLLM's source of a release


def _python_member(name: str) -> bool:
    return name.startswith("vllm/") and not name.endswith((".so", "/")) and "__pycache__" not in name


def _metadata_member(name: str) -> bool:
    top, _, rest = name.partition("/")
    return top.startswith("vllm-") and top.endswith(".dist-info") and rest == "METADATA"


def source_tree(tag: str) -> Path:
    """The directory whose `vllm/` is release `tag`'s Python tree, extracted once into the wheel cache.

    The directory is named after the sha256 the index lists for the wheel and appears whole (a
    rename) only after every member was read from the wheel with that sha256, so finding it is
    enough: the 250 MB wheel is not read and hashed again for every run.
    """
    return _extracted(tag, "python", _python_member)


def metadata_tree(tag: str) -> Path:
    """The directory holding release `tag`'s `vllm-X.dist-info/METADATA`, extracted once into the wheel cache."""
    return _extracted(tag, "dist-info", _metadata_member)


_expected: dict[Path, dict[str, str]] = {}
_expected_lock = threading.Lock()


def _extracted(tag: str, kind: str, want: Want) -> Path:
    """The tree, extracted once; before each use every file is held to the sha256 of the member the release
    wheel's RECORD verified (computed once per process): a tree a run changed, added to or emptied is
    said, removed and extracted again (issue 43: a test appended a line that later runs trusted)."""
    version = version_of_tag(tag)
    target = cache_dir() / version / f"{kind}-{lookup(version).sha256[:16]}"
    with _expected_lock:
        expected = _expected.get(target)
        if expected is None or not target.is_dir():
            # Extracting reads the whole wheel whose sha256 is the index's; checking an extracted tree reads its
            # members against the cached wheel's RECORD only (about 0.2 s less CPU than hashing 250-500 MB).
            content = verified_content(version, want) if not target.is_dir() else member_content(version, want)
            safe.check_names(content.files, content.wheel)  # names from the wheel are checked before they are paths
            expected = {name: hashlib.sha256(data).hexdigest() for name, data in content.files.items()}
            if not target.is_dir():
                _extract(target, kind, content.files)
            _expected[target] = expected
        differs = _differs(target, expected)
        if differs:
            log.warn(f"{target} is not release {tag}'s files ({differs}); extracting them again")
            shutil.rmtree(target, ignore_errors=True)
            content = verified_content(version, want)
            _extract(target, kind, content.files)
            again = _differs(target, expected)
            if again:
                raise OSError(f"{target} differs from release {tag}'s files after extracting them ({again})")
    return target


def _differs(target: Path, expected: dict[str, str]) -> str:
    """What about the tree under `target` is not `expected` ({name: sha256}), or ""."""
    found = {}
    for path in target.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            continue
        name = path.relative_to(target).as_posix()
        if path.is_symlink() or not path.is_file():
            return f"{name} is not a plain file"
        found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    extra = sorted(set(found) - set(expected))
    missing = sorted(set(expected) - set(found))
    changed = sorted(n for n in set(found) & set(expected) if found[n] != expected[n])
    for label, names in (("changed", changed), ("added", extra), ("missing", missing)):
        if names:
            return f"{label}: {names[0]}" + (f" and {len(names) - 1} more" if len(names) > 1 else "")
    return ""


def _extract(target: Path, kind: str, files: dict[str, bytes]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # A staging tree a killed extraction left (its owner gone) is removed by the next one (release/evidence/scratch.py).
    with scratch.owned(f".{kind}-", target.parent) as staging:
        for name, data in files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (staging / scratch.LOCK).unlink()  # not one of the release's files; the descriptor keeps the lock
        try:
            staging.rename(target)  # whole or not at all; a concurrent run that got there first wins
        except OSError:
            if not target.is_dir():
                raise


# ------------------------------------------------------------------ the wheel installed beside it


def wheel_venv(python: str, tag: str, wheel: Path, work: Path) -> tuple[str, str]:
    """A venv under `work` with release `tag` and `wheel` installed: (its python, "") or ("", why not)."""
    venv = work / "venv"
    made = _run([python, "-m", "venv", "--without-pip", str(venv)], work, hermetic_env(work))
    if made.startswith("!"):
        return "", f"no venv from {python}: {made.removeprefix('!')}"
    lib = sorted((venv / "lib").glob("python3*/site-packages"))
    if len(lib) != 1:
        return "", f"no site-packages in the venv {python} made"
    lent, problem = _site_packages(python, work)
    if problem:
        return "", problem
    lines = [str(source_tree(tag)), str(metadata_tree(tag)), *lent]
    (lib[0] / "_evidence_env.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")
    venv_python = str(venv / "bin" / "python")
    env = hermetic_env(work)
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    # The venv's own interpreter runs pip (the proving environment's, on its path through the .pth above): one
    # interpreter start and pip import, where `pip --python VENV` started pip and then pip again under VENV.
    command = [venv_python, "-m", "pip", "install", "--no-deps", "--no-index"]
    installed = _run([*command, "--no-compile", str(wheel)], work, env)
    if installed.startswith("!"):
        return "", f"pip did not install {wheel.name}: {installed.removeprefix('!')}"
    with _venvs_lock:
        _venvs[venv_python] = (python, str(lib[0]))  # a fork server of `python` runs it with this site added
    return venv_python, ""


def _site_packages(python: str, work: Path) -> tuple[list[str], str]:
    """The site-packages `python` names (asked once per interpreter and process: every wheel run of a release
    line asks the same proving environment), or ([], why not)."""
    with _venvs_lock:
        known = _lent.get(python)
    if known is not None:
        return known, ""
    probe = [python, "-s", "-c", "import site, sys; print('\\n'.join(site.getsitepackages()))"]
    paths = _run(probe, work, hermetic_env(work))
    lent = [line for line in paths.splitlines() if line.strip()] if not paths.startswith("!") else []
    if not lent:
        return [], f"{python} names no site-packages: {paths.removeprefix('!')}"
    with _venvs_lock:
        _lent[python] = lent
    return lent, ""


# An interpreter -> the site-packages it names (the probe's answer, kept for the process).
_lent: dict[str, list[str]] = {}
# A wheel run's venv python -> (the interpreter it was made from, its site-packages): such a run is forked
# from that interpreter's server with the venv's site-packages added by `site.addsitedir` (.pth files run).
_venvs: dict[str, tuple[str, str]] = {}
_venvs_lock = threading.Lock()


@contextmanager
def work_dir() -> Iterator[Path]:
    """A run's scratch directory in the temporary directory, removed after it, and by a later run where a
    kill left it (release/evidence/scratch.py)."""
    with scratch.owned(WORK_PREFIX) as path:
        yield path


def hermetic_env(work: Path) -> dict[str, str]:
    """The environment of a process of a run: INHERITED from the caller, a fresh HOME and TMPDIR under
    `work`, no user site-packages, no plugin autoloading; compiled modules kept beside the wheel cache."""
    env = {name: os.environ[name] for name in INHERITED if name in os.environ}
    home, tmp = work / "home", work / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        PYTHONNOUSERSITE="1",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        # Without them every run compiles torch's and vLLM's modules again; never inside the extracted trees.
        PYTHONPYCACHEPREFIX=str(cache_dir().parent / "pycache"),
    )
    env.setdefault("PATH", os.defpath)
    return env


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    """stdout of a short helper process, or "!" and why it failed."""
    try:
        proc = subprocess.run(
            command,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=HELPER_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"!{exc}"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return f"!{tail[0]}"
    return proc.stdout


# ------------------------------------------------------------------------------ one run


def run_test(python: str, tree: Path | None, test_path: str, test_text: str, work: Path) -> tuple[str, str, str]:
    """pytest on `test_path` under `python`, in a guard (release/evidence/child/): (result, summary, detail).

    `tree`: a release's Python tree, put first on `PYTHONPATH` with our hook off (the pristine
    release); None: `python` is a venv with the release and our wheel installed (its hook on).
    """
    checkout = work / "checkout"
    (checkout / test_path).parent.mkdir(parents=True, exist_ok=True)
    (checkout / test_path).write_text(test_text, encoding="utf-8")
    (checkout / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
    env = hermetic_env(work)
    # The tool's plugin beside the release's tree; nothing of the caller's PYTHONPATH.
    env["PYTHONPATH"] = os.pathsep.join([*([str(tree)] if tree is not None else []), str(CHILD)])
    if tree is not None:
        env["VLLM_FUSED_MOE"] = "off"  # our overlay, if that interpreter has it, must not serve its files
    pytest = [python, "-s", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN, "--rootdir", str(checkout)]
    pytest += ["-c", str(checkout / "pytest.ini"), test_path]
    served = _on_server(python, tree, checkout, env, pytest[4:])
    if served is not None:
        returncode, lines, text = served
    else:
        returncode, lines, text = _as_process(python, pytest, checkout, env)
    if returncode == TIMED_OUT:
        return ERROR, "timed out", f"pytest ran past {RUN_TIMEOUT_S} s; the guard ended it and what it started"
    if returncode != 0 and NO_PYTEST in text and not lines:
        raise NoPytestError(f"{python} has no pytest: the regression test {test_path} cannot run there")
    tail = text.strip().splitlines()[-1:] or ["no output"]
    return judge(returncode, [_parse(line) for line in lines], tail[0])


def _on_server(
    python: str, tree: Path | None, checkout: Path, env: dict[str, str], argv: list[str]
) -> tuple[int, list[bytes], str] | None:
    """The run forked from the fork server of its environment (release/evidence/forkserver.py), or None."""
    server_python, site = _venvs.get(python, (python, None))
    request = {
        "cwd": str(checkout),
        "env": env,
        "path": [str(tree)] if tree is not None else [],
        "site": site,
        "argv": argv,
        "timeout": RUN_TIMEOUT_S,
    }
    own = {k: v for k, v in env.items() if k != "VLLM_FUSED_MOE"}
    own["PYTHONPATH"] = str(CHILD)
    answer = forkserver.run(server_python, PRELOAD, own, request, RUN_TIMEOUT_S + 30)
    if not isinstance(answer, dict) or not isinstance(answer.get("status"), int):
        return None
    reports = [str(line).encode() for line in answer.get("reports", [])]
    return int(answer["status"]), reports, str(answer.get("output", ""))


def _as_process(python: str, pytest: list[str], checkout: Path, env: dict[str, str]) -> tuple[int, list[bytes], str]:
    """The run as a process of its own, under the guard script: (exit status, report lines, its output)."""
    read, write = os.pipe()
    env = {**env, FD_VAR: str(write)}
    lines: list[bytes] = []
    printed: list[bytes] = []
    try:
        proc = subprocess.Popen(
            [python, "-s", str(GUARD), str(RUN_TIMEOUT_S), "--", *pytest],
            cwd=checkout,
            env=env,
            # The guard watches its stdin: this end stays open while the tool lives, and when it closes (the
            # tool ended or died), the guard ends the run and everything it started.
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(write,),
            start_new_session=True,
        )
    except OSError as exc:
        os.close(read)
        return 127, [], f"{python}: {exc.strerror}"
    finally:
        os.close(write)
    assert proc.stdout is not None and proc.stdin is not None  # both are pipes
    readers = [
        threading.Thread(target=_drain, args=(read, lines), daemon=True),
        threading.Thread(target=_drain, args=(os.dup(proc.stdout.fileno()), printed), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=RUN_TIMEOUT_S + 30)
    except subprocess.TimeoutExpired:
        _kill_session(proc)  # the guard itself hangs: end its whole session (it made one)
    finally:
        proc.stdin.close()
        proc.stdout.close()
    for reader in readers:
        reader.join(timeout=10)
    return (
        int(proc.returncode if proc.returncode is not None else -9),
        lines,
        b"\n".join(printed).decode("utf-8", "replace"),
    )


def _drain(fd: int, into: list[bytes]) -> None:
    with os.fdopen(fd, "rb") as pipe:
        into.extend(pipe.read().splitlines())


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    with suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _parse(line: bytes) -> dict[str, Any]:
    try:
        data = parse_json(line, where="the report plugin's line")
    except BadInputError:
        return {"kind": "garbled"}
    return data if isinstance(data, dict) else {"kind": "garbled"}


def judge(returncode: int | None, reports: list[dict[str, Any]], tail: str) -> tuple[str, str, str]:
    """(result, summary, detail) from what the tool's plugin reported, held to the run's exit status."""
    outcomes: dict[str, str] = {}
    message = ""
    collect_errors = 0
    session: dict[str, Any] | None = None
    for report in reports:
        kind = report.get("kind")
        if kind == "session":
            session = report
        elif kind == "collect":
            collect_errors += 1
            message = message or str(report.get("message", ""))
        elif kind == "test":
            test, when, outcome = str(report.get("id")), report.get("when"), report.get("outcome")
            if report.get("xfail") or outcome == "skipped":
                outcomes[test] = "skipped"
            elif outcome == "failed":
                outcomes[test] = "failed" if when == "call" and outcomes.get(test) != "errors" else "errors"
                message = message or str(report.get("message", ""))
            else:
                outcomes.setdefault(test, "passed")
        else:
            return ERROR, "garbled report", "the run wrote to the tool's pipe what its plugin never writes"
    failed, erred, skipped, passed = (sum(1 for o in outcomes.values() if o == w) for w in OUTCOMES)
    errors = erred + collect_errors
    counts = (failed, errors, skipped, len(outcomes))
    labels = ((passed, "passed"), (failed, "failed"), (errors, "errors"), (skipped, "skipped"))
    summary = ", ".join(f"{n} {label}" for n, label in labels if n) or "no test ran"
    if session is None:
        why = "gone" if returncode == ORPHANED else f"exit {returncode}"
        return ERROR, summary, f"the run ended ({why}) before pytest reported its end: {tail}"
    if session.get("exitstatus") != returncode:
        return ERROR, summary, f"pytest reported exit {session.get('exitstatus')}, but the run exited {returncode}"
    detail = message or ("" if returncode == 0 else tail)
    return verdict(int(returncode or 0), counts), summary, detail


def verdict(returncode: int, counts: tuple[int, int, int, int]) -> str:
    """A clean pass (every collected test passed, none skipped), a clean fail (failures, no error), or error."""
    failed, errors, skipped, total = counts
    if returncode == 0 and total and not (failed or errors or skipped):
        return PASSED
    if returncode == 1 and failed and not errors:
        return FAILED
    return ERROR
