"""One run of a regression test under an interpreter with torch: on a release's pristine tree, or with a wheel.

The tooling's own interpreter has no torch; the interpreter given (`publish --python`, the nox
`publish` session's, the test venv's) has torch and what vLLM imports. vLLM itself comes from its
real release wheel:

- the release's Python tree, read from its real release wheel (the cached one whose sha256 is the
  index's, every member checked against the wheel's RECORD) and extracted once into the wheel cache
  (`<cache>/wheels/<version>/python-<sha256 prefix>/vllm/`); compiled extensions are left out, as
  they load against CUDA builds of torch that a CPU interpreter does not have, and vLLM imports
  without them. Its `.dist-info/METADATA` is extracted beside it (`dist-info-<prefix>/`): the
  overlay's hook reads the installed vLLM's version from it, as in a user's environment;
- pristine: pytest with that tree first on `PYTHONPATH` and our hook off (`VLLM_FUSED_MOE=off`);
- with the wheel: a fresh venv (no pip of its own) whose one `.pth` puts vLLM's tree and then the
  interpreter's own site-packages (torch, pytest, vLLM's import-time packages) on its path, and
  our wheel installed into it by pip `--no-deps`, as a user installs it, so that its `.pth` hook
  serves our files under vLLM's names when the test imports them.

Only a clean fail and a clean pass count (pytest's junit XML read back: every test case ran, none
errored or was skipped); an error, a skip, an import that fails or no test collected is "error".

This module starts processes (pytest, pip, the venv's interpreter) and is named in the "processes"
import contract for it (pyproject.toml). `upstream-pr` runs its tests here too (upstream_pr/prove.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from release.core.errors import NoPytestError
from release.core.versions import version_of_tag
from release.pristine import safe
from release.pristine.wheel import Want, cache_dir, lookup, verified_content

# vLLM registers this marker in its pyproject.toml ("cpu_test: mark test as CPU-only test"); the
# scratch checkout registers it too, so a test marked as vLLM marks CPU tests runs without a warning.
NO_PYTEST = "No module named pytest"  # what `python -m pytest` says where pytest is not installed
PYTEST_INI = "[pytest]\nmarkers =\n    cpu_test: mark test as CPU-only test\n"
# A generous bound for one run: importing torch and vLLM's MoE modules on a loaded 2-core machine.
RUN_TIMEOUT_S = 600
PASSED, FAILED, ERROR = "passed", "failed", "error"


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


def _extracted(tag: str, kind: str, want: Want) -> Path:
    version = version_of_tag(tag)
    target = cache_dir() / version / f"{kind}-{lookup(version).sha256[:16]}"
    if target.is_dir():
        return target
    content = verified_content(version, want)
    safe.check_names(content.files, content.wheel)  # names from the wheel are checked before they are paths
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{kind}-", dir=target.parent))
    try:
        for name, data in content.files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        try:
            staging.rename(target)  # whole or not at all; a concurrent run that got there first wins
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


# ------------------------------------------------------------------ the wheel installed beside it


def wheel_venv(python: str, tag: str, wheel: Path, work: Path) -> tuple[str, str]:
    """A venv under `work` with release `tag` and `wheel` installed: (its python, "") or ("", why not)."""
    venv = work / "venv"
    made = _run([python, "-m", "venv", "--without-pip", str(venv)], work, dict(os.environ))
    if made.startswith("!"):
        return "", f"no venv from {python}: {made.removeprefix('!')}"
    lib = sorted((venv / "lib").glob("python3*/site-packages"))
    if len(lib) != 1:
        return "", f"no site-packages in the venv {python} made"
    paths = _run([python, "-c", "import site, sys; print('\\n'.join(site.getsitepackages()))"], work, _clean())
    lent = [line for line in paths.splitlines() if line.strip()] if not paths.startswith("!") else []
    if not lent:
        return "", f"{python} names no site-packages: {paths.removeprefix('!')}"
    lines = [str(source_tree(tag)), str(metadata_tree(tag)), *lent]
    (lib[0] / "_evidence_env.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")
    venv_python = str(venv / "bin" / "python")
    env = _clean()
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    command = [python, "-m", "pip", "--python", venv_python, "install", "--no-deps", "--no-index"]
    installed = _run([*command, "--no-compile", str(wheel)], work, env)
    if installed.startswith("!"):
        return "", f"pip did not install {wheel.name}: {installed.removeprefix('!')}"
    return venv_python, ""


def _clean() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith(("PIP_", "VLLM_FUSED_MOE"))}


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    """stdout of a short helper process, or "!" and why it failed."""
    try:
        proc = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"!{exc}"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return f"!{tail[0]}"
    return proc.stdout


# ------------------------------------------------------------------------------ one run


def run_test(python: str, tree: Path | None, test_path: str, test_text: str, work: Path) -> tuple[str, str, str]:
    """pytest on `test_path` under `python`: (result, summary, detail).

    `tree`: a release's Python tree, put first on `PYTHONPATH` with our hook off (the pristine
    release); None: `python` is a venv with the release and our wheel installed (its hook on).
    """
    checkout = work / "checkout"
    (checkout / test_path).parent.mkdir(parents=True, exist_ok=True)
    (checkout / test_path).write_text(test_text, encoding="utf-8")
    (checkout / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
    junit = work / "junit.xml"
    env = _clean()
    if tree is not None:
        # Our overlay, if installed in that interpreter, must not serve its files instead of the release's.
        env.update(PYTHONPATH=str(tree), VLLM_FUSED_MOE="off")
    if not env.get("PYTHONPYCACHEPREFIX"):
        # Compiled modules beside the wheel cache, never inside the extracted trees: without them every
        # run compiles torch's and vLLM's modules again (where PYTHONDONTWRITEBYTECODE is set, too).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache_dir().parent / "pycache")
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(checkout)]
    command += ["-c", str(checkout / "pytest.ini"), f"--junitxml={junit}", test_path]
    try:
        proc = subprocess.run(
            command, cwd=checkout, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return ERROR, "timed out", f"pytest ran past {RUN_TIMEOUT_S} s"
    except OSError as exc:
        return ERROR, "did not start", f"{python}: {exc.strerror}"
    if proc.returncode != 0 and NO_PYTEST in proc.stderr and not junit.exists():
        raise NoPytestError(f"{python} has no pytest: the regression test {test_path} cannot run there")
    counts, message = _junit(junit)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
    failed, errors, skipped, total = counts
    summary = (
        ", ".join(
            f"{n} {label}"
            for n, label in (
                (total - failed - errors - skipped, "passed"),
                (failed, "failed"),
                (errors, "errors"),
                (skipped, "skipped"),
            )
            if n
        )
        or "no test ran"
    )
    return verdict(proc.returncode, counts), summary, message or ("" if proc.returncode == 0 else tail[0])


def verdict(returncode: int, counts: tuple[int, int, int, int]) -> str:
    """A clean pass (every collected test passed, none skipped), a clean fail (failures, no error), or error."""
    failed, errors, skipped, total = counts
    if returncode == 0 and total and not (failed or errors or skipped):
        return PASSED
    if returncode == 1 and failed and not errors:
        return FAILED
    return ERROR


def _junit(path: Path) -> tuple[tuple[int, int, int, int], str]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return (0, 0, 0, 0), ""
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    totals = [sum(int(s.get(key, "0") or 0) for s in suites) for key in ("failures", "errors", "skipped", "tests")]
    first = root.find(".//testcase/failure")
    if first is None:
        first = root.find(".//testcase/error")
    message = (first.get("message", "") if first is not None else "").strip().splitlines()
    return (totals[0], totals[1], totals[2], totals[3]), (message[0] if message else "")
