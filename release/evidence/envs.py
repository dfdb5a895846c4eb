"""The proving environment of a release line: what a bug's regression test runs under, made by the tool itself.

envs/lines.toml names, for each release line, a hash-pinned requirements file (torch's CPU build, the
packages that line's vLLM imports on the code under test, pytest and pip) and the Python version. The
tool makes that environment with uv (pinned in pyproject.toml's `tooling` group) into the cache,
`<cache>/envs/<key>/`, where the key is the digest of what it installs (the file's bytes and the
Python version): lines that share a file share one environment, and an edited file makes a new one.
It appears whole (a rename of a staging directory, `.env-*`, under a file lock), so a killed run
leaves a staging tree that the next one removes, never a half environment that looks whole. Nobody
is asked for an interpreter; `--python` overrides it (`given`).

Each environment has a content digest (`ProvingEnv.digest`): the sha256 of the Python version and of
every installed distribution's dist-info RECORD (each file with its hash), so two environments with
the same packages have the same digest wherever they lie, and a package installed, removed or
upgraded changes it. The evidence cache keys each run by it (release/evidence/gather.py), never by
the interpreter's path.

This module starts processes (uv, and the given interpreter for what it has installed) and is named
in the "processes" import contract for it (pyproject.toml).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from release.core import log
from release.core.errors import BadInputError, ToolMissingError
from release.core.hashing import sha256_hex
from release.core.layout import Layout
from release.core.parse import load_toml, parse_json
from release.pristine.wheel import cache_dir

ENVS_FILE = "envs/lines.toml"
# The index that serves torch's CPU build (pyproject.toml's [[tool.uv.index]] `pytorch-cpu`): asked only
# where the first try, with the sources this machine's pip is configured with, found no such build.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# uv links the packages from its cache in seconds; a cold cache downloads torch's CPU build (~180 MB).
MAKE_TIMEOUT_S = 900
# A bound for asking an interpreter what it has installed: a `--python` that never answers (a script
# that hangs) is given up after this many seconds, named in the error (docs/guarantees.md).
PROBE_TIMEOUT_S = 30
COMPLETE = ".complete"  # written last inside a made environment, before the rename that makes it whole
STAGING_PREFIX = ".env-"
# Where a staging tree of a killed run is taken for abandoned: older than any make can take.
STALE_AFTER_S = MAKE_TIMEOUT_S + 60


@dataclass(frozen=True)
class ProvingEnv:
    """An interpreter a regression test runs under, and the digest of what it has installed."""

    python: str
    digest: str
    where: str  # for messages: "envs/vllm-cpu.txt (line L)" or "--python PATH"


@dataclass(frozen=True)
class LineEnv:
    requirements: Path
    python: str


def envs_cache() -> Path:
    return cache_dir().parent / "envs"


def line_env(layout: Layout, line: str) -> LineEnv:
    """envs/lines.toml's entry for `line`: its requirements file and Python version."""
    path = layout.root / ENVS_FILE
    data = load_toml(path, hint=f"restore it: git checkout -- {ENVS_FILE}")
    entry = data.get("line", {}).get(line)
    if not isinstance(entry, dict) or not isinstance(entry.get("requirements"), str):
        known = ", ".join(sorted(data.get("line", {})))
        raise BadInputError(
            f"{ENVS_FILE} names no proving environment for release line {line} (it has: {known})",
            hint=f"add [line.{line}] with its `requirements` file and `python` version to {ENVS_FILE}",
        )
    requirements = path.parent / entry["requirements"]
    if not requirements.is_file():
        raise BadInputError(f"{ENVS_FILE}: line {line}'s requirements file {requirements} does not exist")
    return LineEnv(requirements, str(entry.get("python", f"{sys.version_info[0]}.{sys.version_info[1]}")))


# ------------------------------------------------------------------------------ the content digest


def content_digest(version: str, site_dirs: list[Path]) -> str:
    """sha256 of the Python version and each installed distribution's dist-info name and RECORD."""
    parts = [f"python {version}".encode()]
    for site in site_dirs:
        for info in sorted(site.glob("*.dist-info")) if site.is_dir() else []:
            record = info / "RECORD"
            data = record.read_bytes() if record.is_file() else (info / "METADATA").read_bytes()
            parts.append(info.name.encode() + b"\0" + sha256_hex(data).encode())
    return sha256_hex(b"\n".join(parts))


_PROBE = "import json, site, sys; print(json.dumps([sys.version.split()[0], site.getsitepackages()]))"


def given(python: str) -> ProvingEnv:
    """`--python PYTHON` as a proving environment: its digest from what it says it has installed."""
    try:
        proc = subprocess.run(
            [python, "-I", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        version, sites = parse_json(proc.stdout, where=f"--python {python}'s answer")
    except subprocess.TimeoutExpired:
        raise BadInputError(
            f"--python {python} did not say what it has installed within {PROBE_TIMEOUT_S} s",
            hint="give an interpreter (`--python .venv/bin/python`), or leave --python out: the tool makes one",
        ) from None
    except (OSError, ValueError, TypeError, BadInputError) as exc:
        raise BadInputError(
            f"--python {python} is not a Python interpreter that runs here ({exc})",
            hint="give an interpreter (`--python .venv/bin/python`), or leave --python out: the tool makes one",
        ) from None
    return ProvingEnv(python, content_digest(str(version), [Path(s) for s in sites]), f"--python {python}")


# ------------------------------------------------------------------------------ made by the tool

_made: dict[str, ProvingEnv] = {}
_made_lock = threading.Lock()


def for_line(layout: Layout, line: str) -> ProvingEnv:
    """The proving environment of `line`, made once into the cache (and once per process looked at)."""
    spec = line_env(layout, line)
    data = spec.requirements.read_bytes()
    key = sha256_hex(f"python {spec.python}\0".encode() + data)[:24]
    with _made_lock:
        if key not in _made:
            _made[key] = _make(key, spec, line)
        return _made[key]


def _site(root: Path) -> list[Path]:
    return sorted((root / "lib").glob("python3*/site-packages"))


def _make(key: str, spec: LineEnv, line: str) -> ProvingEnv:
    base = envs_cache()
    base.mkdir(parents=True, exist_ok=True)
    root = base / key
    where = f"{spec.requirements.relative_to(spec.requirements.parent.parent)} (line {line})"
    with FileLock(str(base / f"{key}.lock"), timeout=MAKE_TIMEOUT_S + 60):
        remove_abandoned(base)
        if not (root / COMPLETE).is_file():
            shutil.rmtree(root, ignore_errors=True)  # a tree without its mark was never made whole
            started = time.monotonic()
            log.note(f"making the proving environment of line {line} from {where} with uv ...")
            staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=base))
            try:
                _uv_make(staging, spec)
                (staging / COMPLETE).write_text(spec.requirements.name + "\n", encoding="utf-8")
                staging.rename(root)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            log.note(f"made the proving environment of line {line} ({time.monotonic() - started:.1f} s)")
    sites = _site(root)
    python = root / "bin" / "python"
    return ProvingEnv(str(python), content_digest(spec.python, sites), where)


def remove_abandoned(base: Path) -> None:
    """Staging trees (`.env-*`) a killed make left: older than a make can take, so no live make owns them."""
    now = time.time()
    for stale in base.glob(f"{STAGING_PREFIX}*"):
        try:
            if now - stale.stat().st_mtime > STALE_AFTER_S:
                shutil.rmtree(stale, ignore_errors=True)
        except OSError:
            continue


def uv_binary() -> str:
    """uv as pyproject.toml's `tooling` group pins it (its Python package ships the binary), else on PATH."""
    if importlib.util.find_spec("uv") is not None:
        from uv import find_uv_bin  # the pinned binary, beside this interpreter

        return str(find_uv_bin())
    found = shutil.which("uv")
    if found is None:
        raise ToolMissingError(
            "uv is not installed: the tool makes each release line's proving environment with it",
            hint="install the tooling: `python3 -m pip install --group tooling` (it pins uv), or run `nox -s publish`",
        )
    return found


def pip_sources() -> list[str]:
    """Where this machine's pip is told to look for packages (pip.conf, PIP_* variables), as uv options:
    uv reads neither, and a machine whose torch CPU build lies in a local `find-links` needs them."""
    found: list[str] = []
    values: list[tuple[str, str]] = [
        (option, os.environ.get(f"PIP_{option.upper().replace('-', '_')}", ""))
        for option in ("index-url", "extra-index-url", "find-links")
    ]
    if importlib.util.find_spec("pip") is not None:
        try:
            listing = subprocess.run(
                [sys.executable, "-m", "pip", "config", "list"],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            listing = ""
        for text in listing.splitlines():
            key, _, value = text.partition("=")
            values.append((key.rpartition(".")[2], value.strip().strip("'\"")))
    for option, value in values:
        if option not in ("index-url", "extra-index-url", "find-links"):
            continue
        for item in value.split():
            if item not in found:
                found += [f"--{option}", item]
    return found


def _uv_make(staging: Path, spec: LineEnv) -> None:
    uv = uv_binary()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "CONDA"))}
    _uv([uv, "venv", "--quiet", "--relocatable", "--python", spec.python, str(staging)], env)
    install = [uv, "pip", "install", "--quiet", "--python", str(staging / "bin" / "python"), "--require-hashes"]
    # Every file is pinned by its sha256, so no index can hand over another package: let uv weigh all the
    # sources as pip does (pip.conf's extra indexes here hold older versions of some of them).
    install += ["--index-strategy", "unsafe-best-match", "-r", str(spec.requirements)]
    sources = pip_sources()
    why = _uv([*install, *sources], env, check=False)
    if why:
        # PyPI serves torch's CUDA build under the same version: its CPU build comes from PyTorch's index.
        log.note(f"uv found no torch CPU build in this machine's package sources; asking {TORCH_CPU_INDEX}")
        why = _uv([*install, *sources, "--extra-index-url", TORCH_CPU_INDEX], env, check=False)
        if why:
            raise ToolMissingError(
                f"uv could not make the proving environment from {spec.requirements}: {why}",
                hint="torch's CPU build comes from PyTorch's CPU index or a `find-links` in pip.conf; "
                "or give an interpreter that has it: --python PATH",
            )


def _uv(command: list[str], env: dict[str, str], check: bool = True) -> str:
    """Run uv; "" where it worked, else its last line of complaint (raised as ToolMissingError with `check`)."""
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=MAKE_TIMEOUT_S,
            check=False,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = str(exc)
    else:
        if proc.returncode == 0:
            return ""
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        why = " ".join(lines[-3:]) or f"exit {proc.returncode}"
    if check:
        raise ToolMissingError(f"uv failed ({' '.join(command[1:3])}): {why}")
    return why


def resolve(layout: Layout, line: str, python: str | None) -> ProvingEnv:
    """`--python`'s interpreter where one was given, else `line`'s proving environment (made where missing)."""
    if python:
        with _made_lock:
            if python not in _made:
                _made[python] = given(python)
            return _made[python]
    return for_line(layout, line)
