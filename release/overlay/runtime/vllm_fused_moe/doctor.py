"""`vllm-fused-moe doctor`: is this environment affected by the FlashInfer NVLink double reduce, is the fix live?

Two ways to run it, one code:
- `vllm-fused-moe doctor [--json] [--live] [-- VLLM_SERVE_ARGS...]` (or `python -m vllm_fused_moe doctor`)
  in an environment where our overlay is installed: the scan data is the one shipped in the wheel;
- `PYTHON path/to/doctor.py --scan FILE ...`, which is what `python -m release doctor --python PYTHON`
  runs from a checkout: any interpreter, with or without our overlay installed.

Standard library only at module level, Python 3.10+: it must run in whatever environment is asked.
Without --live it imports neither torch nor vLLM (versions come from package metadata); with --live
it imports the one vLLM module that resolves the FlashInfer all-to-all prepare/finalize classes of
the installed release's line (the NVLink classes from 0.18.0; older lines' classes as the scan data
names them), as vLLM itself does, and reads `output_is_reduced()` from them. docs/doctor.md: fields,
schema, exit codes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

REPORT_SCHEMA = 1
SCAN_SCHEMA = 1
SCAN_NAME = "affected-releases.json"
PROJECT = "vllm-fused-moe"
PACKAGE = "vllm_fused_moe"
MODE_ENV = "VLLM_FUSED_MOE"  # the same name as vllm_fused_moe.MODE_ENV; not imported so a bare run works
INDEX_ENV = "VLLM_FUSED_MOE_INDEX_URL"
INDEX_PLACEHOLDER = "<INDEX_URL>"

EXIT_OK = 0
EXIT_AFFECTED = 1
EXIT_CANNOT_TELL = 2
EXIT_CODES = {
    "not-affected": EXIT_OK,
    "fixed-live": EXIT_OK,
    "not-used": EXIT_OK,
    "affected": EXIT_AFFECTED,
    "fixed-not-live": EXIT_AFFECTED,
    "cannot-tell": EXIT_CANNOT_TELL,
    "refused": EXIT_CANNOT_TELL,
}

# Where vLLM resolves the two classes (all2all_utils.maybe_make_prepare_finalize imports them from
# prepare_finalize/ at module level), so importing it is importing them the way vLLM does. This is
# what --live reads where the scan data names nothing else: each release line's own module and
# classes come with the scan data (`lines.<name>.live`, from patches/lines.toml).
ALL2ALL_MODULE = "vllm.model_executor.layers.fused_moe.all2all_utils"
CLASSES = ("FlashInferNVLinkTwoSidedPrepareAndFinalize", "FlashInferNVLinkOneSidedPrepareAndFinalize")
# `--all2all-backend` values that select one of CLASSES (FusedMoEParallelConfig.use_fi_nvl_*_kernels).
AFFECTED_BACKENDS = {
    "flashinfer_nvlink_two_sided": CLASSES[0],
    "flashinfer_all2allv": CLASSES[0],
    "flashinfer_nvlink_one_sided": CLASSES[1],
}
DEFAULT_BACKEND = "allgather_reducescatter"
BACKEND_ENV = "VLLM_ALL2ALL_BACKEND"  # read by 0.11-0.15 only: the scan data says how (`backend_env`)
# The DP-chunking switch of 0.13-0.19, named in a note where the installed release does not read it
# (where it does, the scan data names it: `dp_chunk_env`).
DP_CHUNK_ENV = "VLLM_ENABLE_MOE_DP_CHUNK"


# ----------------------------------------------------------------------------- facts


def dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def public_version(version: str) -> str:
    """`0.20.0+cu129` -> `0.20.0`: vLLM's local builds are the same source as the release."""
    try:
        from packaging.version import Version  # vLLM depends on packaging; without it, the text

        return str(Version(version).public)
    except Exception:
        return version.split("+", 1)[0]


def version_key(version: str) -> tuple[Any, ...]:
    try:
        from packaging.version import Version

        return (0, Version(version))
    except Exception:
        return (1, tuple(int(part) for part in re.findall(r"\d+", version)))


def load_scan(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The scan data at `path`, or why it cannot be used."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return None, f"cannot read the scan data {path}: {exc.strerror or exc}"
    except ValueError as exc:
        return None, f"the scan data {path} is not JSON: {exc}"
    if not isinstance(data, dict) or data.get("schema") != SCAN_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        return None, f"the scan data {path} has schema {found!r}; this doctor reads schema {SCAN_SCHEMA}"
    if not isinstance(data.get("releases"), dict) or not isinstance(data.get("scanned"), list):
        return None, f"the scan data {path} has no 'releases' table or 'scanned' list"
    return data, None


def find_scan(given: Path | None, overlay_dir: Path | None) -> tuple[Path | None, str]:
    """Which scan data to read: --scan, else the file beside this module, else the installed overlay's."""
    if given is not None:
        return given.resolve(), "given with --scan"
    beside = Path(__file__).resolve().with_name(SCAN_NAME)
    if beside.is_file():
        return beside, "shipped beside the doctor"
    if overlay_dir is not None and (overlay_dir / SCAN_NAME).is_file():
        return overlay_dir / SCAN_NAME, "shipped in the installed overlay"
    return None, "none found"


def release_facts(scan: dict[str, Any] | None, scan_problem: str | None, vllm: str | None) -> dict[str, Any]:
    """What the scan data says about the installed vLLM release; status `unknown` says why not."""
    facts: dict[str, Any] = {
        "status": "unknown",
        "why": "",
        "line": None,
        "in_train": None,
        "patches": {},
        "wheel": None,
        "flashinfer": None,
        "fixed_in": scan.get("fixed_in") if scan else None,
        # Per bug our patches fix: {id: {"status", "title", "patches"}} (scan data from before bugs: {}).
        "bugs": {},
        "needs": [],  # the bugs this release is affected by: what an overlay for it must carry
        "optional_overlay": False,  # not affected, yet an overlay with downstream changes is published for it
    }
    if vllm is None:
        facts["why"] = "vLLM is not installed in this environment"
        return facts
    if scan is None:
        facts["why"] = scan_problem or "no scan data"
        return facts
    version = public_version(vllm)
    entry = scan["releases"].get(version)
    if isinstance(entry, dict) and entry.get("status") in ("affected", "fixed", "not-affected"):
        facts.update(
            status=entry["status"],
            line=entry.get("line"),
            in_train=bool(entry.get("in_train")),
            patches=entry.get("patches") or {},
            wheel=entry.get("wheel"),
            flashinfer=entry.get("flashinfer"),
        )
        facts["why"] = {
            "affected": "this release carries the double reduce"
            + (f" (in its {entry.get('line')} modules)" if entry.get("line") else ""),
            "fixed": "this release has the fix upstream",
            "not-affected": "this release does not have the affected code",
        }[entry["status"]]
        known: dict[str, Any] = scan["bugs"] if isinstance(scan.get("bugs"), dict) else {}
        statuses: dict[str, Any] = entry["bugs"] if isinstance(entry.get("bugs"), dict) else {}
        for bug, state in statuses.items():
            info: dict[str, Any] = known[bug] if isinstance(known.get(bug), dict) else {}
            facts["bugs"][str(bug)] = {
                "status": str(state),
                "title": str(info.get("title") or ""),
                "patches": [str(name) for name in info.get("patches") or []],
            }
        facts["needs"] = [bug for bug, info in facts["bugs"].items() if info["status"] == "affected"]
        if facts["in_train"] and entry["status"] != "affected":
            # The train carries downstream changes for it too (a patch that applies here for no bug).
            facts["optional_overlay"] = True
            facts["why"] += (
                f"; an overlay for it is published with downstream changes only (optional: `pip install "
                f"{PROJECT}=={version}` from our index)"
            )
        return facts
    scanned = [str(v) for v in scan["scanned"]]
    newest = str(scan.get("newest_scanned") or (scanned[-1] if scanned else ""))
    if newest and version_key(version) > version_key(newest):
        facts["why"] = (
            f"vLLM {version} is newer than the newest release in the scan data ({newest}); "
            "cannot tell without guessing: use scan data from a newer vllm-fused-moe"
        )
    elif scanned and version_key(version) < version_key(scanned[0]):
        facts["why"] = f"vLLM {version} is older than the oldest release in the scan data ({scanned[0]})"
    else:
        facts["why"] = f"vLLM {version} is not a release in the scan data (a development or patched build?)"
    return facts


# ----------------------------------------------------------------------------- the overlay


def blank_overlay() -> dict[str, Any]:
    """`overlay` of a report where our overlay is not installed."""
    return {
        "installed": False,
        "version": dist_version(PROJECT),
        "vllm_tag": None,
        "location": None,
        "mode": os.environ.get(MODE_ENV),
        "hook_installed": False,
        "for_this_vllm": False,
        "activates": None,
        "reason": None,
        "flashinfer_specifier": None,
        "patches": [],
        "bugs": [],  # the bugs its patches fix (their `bug`, or the Bug: trailer of older builds)
        "missing_fixes": [],  # the release's bugs (release.needs) none of its patches fixes
    }


def overlay_state() -> dict[str, Any]:
    """Is our overlay installed here, for which tag, and does the import hook activate it?"""
    state = blank_overlay()
    try:
        spec = find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:  # nothing, or a folder without __init__.py (a namespace)
        if state["version"] is not None:
            state["reason"] = (
                f"{PROJECT} {state['version']} is recorded as installed (its .dist-info), but its package "
                f"{PACKAGE}/ is gone: pip takes the record for the install and keeps it"
            )
            state["damaged"] = True
        return state
    state["installed"] = True
    try:
        meta = importlib.import_module(f"{PACKAGE}._meta")
        activate = importlib.import_module(f"{PACKAGE}._activate")
        finder = importlib.import_module(f"{PACKAGE}._finder")
        info = meta.load()
        chosen = activate.mode()
        vllm = dist_version("vllm")
        state.update(
            version=info.get("version") or state["version"],
            vllm_tag=info.get("vllm_tag"),
            for_this_vllm=vllm is not None and public_version(vllm) == public_version(str(info.get("vllm_version"))),
            location=str(meta.HERE),
            mode=chosen,
            hook_installed=finder.installed_finder() is not None,
            flashinfer_specifier=info.get("flashinfer_specifier"),
            patches=[p.get("name") for p in info.get("patches", [])],
            patch_info=[p for p in info.get("patches", []) if isinstance(p, dict)],
        )
        decision = getattr(activate, "activation", None)
        if decision is None:
            state["reason"] = "this overlay is older than the doctor: it cannot say how its hook decides"
            return state
        # The hook's own decision, made on the facts it would read when vLLM imports the subtree.
        active, reason = decision(info, chosen, vllm, activate.flashinfer_version())
        missing = getattr(activate, "files_problem", lambda: None)()
        if active and missing:  # what decide() adds to activation(): a half-removed package serves nothing
            active, reason = False, missing
            state["damaged"] = True  # not in the report: fix_for() reinstalls, conclude() drops it
        state["activates"], state["reason"] = bool(active), reason
        if chosen not in activate.MODES:
            state["reason"] = (
                f"{MODE_ENV}={chosen!r} is not one of {'/'.join(activate.MODES)}; the hook treats it as 'on'"
                + (f"; {reason}" if reason else "")
            )
    except Exception as exc:  # a broken install is a finding, not a crash
        state["activates"] = None
        state["reason"] = f"the installed overlay could not be read: {type(exc).__name__}: {exc}"
        state["damaged"] = True
    return state


def carried_bugs(patches: list[dict[str, Any]], release: dict[str, Any]) -> list[str]:
    """The release's bugs the installed overlay's patches fix: by each patch's `bug` (or its Bug: trailer),
    or by its name or `Varies:` being one of the bug's patches in the scan data."""
    found = []
    for bug, info in release.get("bugs", {}).items():
        names = set(info.get("patches") or [])
        for patch in patches:
            trailers: dict[str, Any] = patch["trailers"] if isinstance(patch.get("trailers"), dict) else {}
            said = patch.get("bug")
            if said is None:
                said = str(trailers.get("Bug", "")).split(" ", 1)[0]
            if said == bug or patch.get("name") in names or trailers.get("Varies") in names:
                found.append(bug)
                break
    return found


def compare_fixes(overlay: dict[str, Any], release: dict[str, Any]) -> None:
    """What the installed overlay carries against what its release needs (overlay `bugs`, `missing_fixes`)."""
    patches = overlay.pop("patch_info", None) or []
    if not overlay["installed"] or not overlay["for_this_vllm"]:
        return
    carried = carried_bugs(patches, release)
    overlay["bugs"] = sorted({*carried, *(str(p["bug"]) for p in patches if p.get("bug"))})
    overlay["missing_fixes"] = [bug for bug in release.get("needs") or [] if bug not in carried]


# ----------------------------------------------------------------------------- --live


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """vLLM and the hook log to stdout; keep stdout for the report (--json is machine-read)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def live_target(scan: dict[str, Any] | None, line: str | None) -> tuple[str, tuple[str, ...]]:
    """The module --live imports and the classes it reads there: the release line's, from the scan data."""
    lines = scan.get("lines") if scan else None
    facts = lines.get(line or "") if isinstance(lines, dict) else None
    live = facts.get("live") if isinstance(facts, dict) else None
    if isinstance(live, dict):
        module, classes = live.get("module"), live.get("classes")
        if isinstance(module, str) and module and isinstance(classes, list) and classes:
            return module, tuple(str(name) for name in classes)
    return ALL2ALL_MODULE, CLASSES


def reduced_as_built(cls: Any) -> bool:
    """cls.output_is_reduced() on an instance set up as vLLM's factory builds it under data parallel:
    no __init__ (it needs the all2all manager of a GPU group), `use_dp` True where the constructor
    takes it (the 0.11-0.15 all-to-all class answers from it)."""
    import inspect

    instance = object.__new__(cls)
    if "use_dp" in inspect.signature(cls.__init__).parameters:
        instance.use_dp = True
    return bool(cls.output_is_reduced(instance))


def live_classes(
    overlay_dir: str | None, module_name: str = ALL2ALL_MODULE, names: tuple[str, ...] = CLASSES
) -> dict[str, Any]:
    """Import the classes as vLLM does and read output_is_reduced() from each (no GPU, no process group)."""
    started = time.perf_counter()
    ours = str(Path(overlay_dir).resolve()) + os.sep if overlay_dir else None
    result: dict[str, Any] = {
        "module": module_name,
        "error": None,
        "seconds": 0.0,
        "hook_active": None,
        "classes": {},
    }
    try:
        import inspect

        with stdout_to_stderr():
            module = importlib.import_module(module_name)
        # What the import hook decided in this process when vLLM imported the subtree (None: no hook).
        # With VLLM_FUSED_MOE=off the .pth leaves only a stand-in finder: the hook is off, not absent.
        # The stand-in says why it stands in (`why`: "off", or what broke the hook), having read the
        # switch with the hook's own words; one from an overlay older than that does not say.
        hooks = [f for f in sys.meta_path if type(f).__name__ == "OverlayFinder"]
        stand_ins = [f for f in sys.meta_path if type(f).__name__ == "OverlayStandIn"]
        if stand_ins and hasattr(stand_ins[0], "why"):
            switched_off = stand_ins[0].why == "off"
        else:
            switched_off = os.environ.get("VLLM_FUSED_MOE", "").strip().lower() in ("off", "0", "false", "no")
        result["hook_active"] = getattr(hooks[0], "active", None) if hooks else (False if switched_off else None)
        for name in names:
            cls = getattr(module, name, None)
            if not isinstance(cls, type):
                result["classes"][name] = {"found": False}
                continue
            source = str(Path(inspect.getfile(cls)).resolve())
            result["classes"][name] = {
                "found": True,
                "module": cls.__module__,
                "file": source,
                "output_is_reduced": reduced_as_built(cls),
                "served_by_overlay": ours is not None and source.startswith(ours),
            }
    except BaseException as exc:  # vLLM failing to import is what the user needs to see, not a traceback
        if isinstance(exc, KeyboardInterrupt):
            raise
        result["error"] = f"{type(exc).__name__}: {exc}"
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


# ----------------------------------------------------------------------------- vllm serve arguments


def in_releases(version: str, specifier: str) -> bool | None:
    """Is `version` in the PEP 440 `specifier` (None: cannot tell)? packaging where it is installed
    (vLLM depends on it); without it, the `>=X,<Y` / `==X` clauses patches/lines.toml uses."""
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion
    except ImportError:
        pass
    else:
        try:
            return SpecifierSet(specifier).contains(version, prereleases=True)
        except (InvalidSpecifier, InvalidVersion):
            return None
    ops = {
        "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        ">=": lambda a, b: a >= b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        "<": lambda a, b: a < b,
    }

    def release(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", text.split("+", 1)[0]))

    for clause in specifier.split(","):
        match = re.fullmatch(r"\s*(==|!=|>=|<=|>|<)\s*(\d+(?:\.\d+)*)\s*", clause)
        if match is None:
            return None
        if not ops[match.group(1)](release(version), release(match.group(2))):
            return False
    return True


def serve_facts(scan: dict[str, Any] | None, line: str | None, version: str | None) -> dict[str, Any] | None:
    """How the installed release reads `vllm serve`, from the scan data (`lines.<line>`: `builds` and
    the `serve` range holding `version`; patches/lines.toml). No `builds` or `range` where the data
    has none for it; None without a vLLM version."""
    if version is None:
        return None
    lines = scan.get("lines") if scan else None
    info = lines.get(line or "") if isinstance(lines, dict) else None
    if not isinstance(info, dict):
        return {"version": version, "line": line, "builds": {}, "range": None}
    builds = info.get("builds")
    ranges = [r for r in info.get("serve") or [] if isinstance(r, dict) and isinstance(r.get("releases"), str)]
    chosen = next((r for r in ranges if in_releases(version, r["releases"])), None)
    return {
        "version": version,
        "line": line,
        "builds": dict(builds) if isinstance(builds, dict) else {},
        "range": chosen,
    }


def _parse_serve_argv(argv: list[str]) -> tuple[dict[str, str], bool, bool, list[str]]:
    """(options given, expert parallel, conclusive, notes): the command line as vLLM's parser reads it."""
    args = list(argv)
    if args[:2] == ["vllm", "serve"]:
        args = args[2:]
    values: dict[str, str] = {}
    expert_parallel = False
    notes: list[str] = []
    conclusive = True
    aliases = {
        "-tp": "--tensor-parallel-size",
        "-dp": "--data-parallel-size",
        "-pcp": "--prefill-context-parallel-size",
        "-ep": "--enable-expert-parallel",
    }
    wanted = ("--all2all-backend", "--tensor-parallel-size", "--data-parallel-size", "--prefill-context-parallel-size")
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        key, eq, value = arg.partition("=")
        if key.startswith("--"):
            key = "--" + key[2:].replace("_", "-")  # vLLM's parser accepts --data_parallel_size too
        key = aliases.get(key, key)
        if key == "--enable-expert-parallel":
            expert_parallel = True
        elif key == "--no-enable-expert-parallel":
            expert_parallel = False
        elif key in wanted:
            if not eq:
                value = args[index] if index < len(args) else ""
                index += 1
            values[key] = value
        elif key == "--config" or key.startswith("--config."):
            conclusive = False
            notes.append("a --config file can set these options too; it is not read, only the command line")
        elif key == "--parallel-config" or key.startswith("--parallel-config."):
            conclusive = False
            notes.append("--parallel-config is not read, only the flat options")
    return values, expert_parallel, conclusive, notes


def serve_layout(
    argv: list[str],
    env: dict[str, str],
    facts: dict[str, Any] | None = None,
    given: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Does this `vllm serve` command line, in environment `env`, meet the double reduce on the installed release?

    `facts` (serve_facts(): the release line's `builds` and `serve` range from the scan data) say
    which values --all2all-backend accepts, how VLLM_ALL2ALL_BACKEND is read, which class each
    backend builds, and which backends take the DP-chunked path under which variable; without
    them, the head line's classes and no check of the choices. The rule, from vLLM's code:
    the FlashInfer all-to-all classes are built only when `use_all2all_kernels` holds (expert
    parallel on, data parallel > 1); the MoE layer then has ep_size = DP x PCP x TP, and the
    output is all-reduced over the TP group again unless output_is_reduced(): by the runner or
    layer (MoERunner._maybe_reduce_final_output, DefaultMoERunner._maybe_reduce_output,
    FusedMoE.forward_native), except on the DP-chunked path, and before 0.20.0 also by every
    model that all-reduces its MoE output itself (maybe_all_reduce_tensor_model_parallel), on
    either path. An all-reduce over a TP group of one rank is the identity: TP 1 is never hit.
    `given`: the variables that came from --env (the rest from this process's environment).
    """
    values, expert_parallel, conclusive, notes = _parse_serve_argv(argv)
    facts = facts or {}
    version = facts.get("version") or "installed"
    span = facts.get("range") if isinstance(facts.get("range"), dict) else None
    choices = [str(c) for c in span.get("all2all_backends") or []] if span else []
    environment: dict[str, dict[str, str]] = {}

    def read(name: str) -> str | None:
        if name in env:
            environment[name] = {"value": env[name], "from": "--env" if name in given else "environment"}
            return env[name]
        return None

    def size(option: str) -> int:
        try:
            return max(int(values.get(option, "1")), 1)
        except ValueError:
            notes.append(f"{option} {values[option]!r} is not an integer; taken as 1")
            return 1

    refused = None
    flag = values.get("--all2all-backend")
    if flag is not None and choices and flag not in choices:
        refused = f"--all2all-backend {flag} is not one of {', '.join(choices)}"
    mode = span.get("backend_env") if span else None
    env_value = read(BACKEND_ENV) if BACKEND_ENV in env else None
    if mode == "overrides" and env_value is not None:
        backend, source = env_value, BACKEND_ENV
        if flag is not None:
            notes.append(f"{BACKEND_ENV}={env_value} is set: vLLM {version} takes it over --all2all-backend {flag}")
    elif mode == "fallback" and flag is None and env_value is not None:
        backend, source = env_value, BACKEND_ENV
    elif flag is not None:
        backend, source = flag, "--all2all-backend"
    else:
        backend, source = DEFAULT_BACKEND, "vLLM's default"
    if env_value is not None and source != BACKEND_ENV:
        notes.append(
            f"{BACKEND_ENV}={env_value} is set, but "
            + {
                "ignored": f"vLLM {version} does not read it",
                "fallback": f"vLLM {version} reads it only without --all2all-backend",
            }.get(str(mode), f"whether vLLM {version} reads it is not in the scan data")
        )
    if refused is None and source == BACKEND_ENV and choices and backend not in choices:
        refused = f"{BACKEND_ENV}={backend} is not one of {', '.join(choices)}"

    tp, dp, pcp = size("--tensor-parallel-size"), size("--data-parallel-size"), size("--prefill-context-parallel-size")
    builds = facts.get("builds") or AFFECTED_BACKENDS
    cls = builds.get(backend)
    uses = cls is not None and expert_parallel and dp > 1
    ep_size = dp * pcp * tp if expert_parallel else 1
    chunked: bool | None = None
    chunk_why = ""
    if span is not None:
        switch = span.get("dp_chunk_env")
        if backend in (span.get("dp_chunked") or []):
            chunked, chunk_why = True, "always (no switch)"
            if switch:
                raw = read(switch) if uses else None
                try:
                    chunked = raw is None or bool(int(raw))
                except ValueError:
                    refused = refused or (
                        f"{switch}={raw!r} is not an integer (vLLM {version} reads it with int() once the "
                        f"{backend} kernels run)"
                    )
                chunk_why = f"{switch}={raw}" if raw is not None else f"{switch} unset, default 1"
        else:
            chunked = False
            if switch and switch in env:
                read(switch)
                notes.append(f"{switch} only switches the DP-chunked path of {', '.join(span['dp_chunked'])} here")
        if not switch and DP_CHUNK_ENV in env:
            read(DP_CHUNK_ENV)
            notes.append(f"vLLM {version} has no DP-chunking switch: {DP_CHUNK_ENV} is not read")
    runs = uses and tp > 1
    if cls is None:
        why = f"all2all backend {backend} ({source}) does not build a FlashInfer all-to-all class"
        if facts.get("builds"):
            why += f" on vLLM {version} (line {facts['line']}: {', '.join(sorted(builds))} do)"
    elif not expert_parallel:
        why = f"{backend} is only used with --enable-expert-parallel"
    elif dp == 1:
        why = f"{backend} is only used with --data-parallel-size > 1 (all2all kernels need DP > 1 and EP)"
    elif tp == 1:
        why = (
            f"{backend} ({source}) with EP and DP {dp} builds {cls}, but with tensor parallel 1 the "
            "all-reduce over the TP group changes nothing: the output is not reduced twice"
        )
    elif chunked:
        why = (
            f"{backend} ({source}) with EP, DP {dp} and TP {tp} builds {cls} on vLLM {version}'s DP-chunked "
            f"path ({chunk_why}): the layer's own final all-reduce is skipped there, but a model that "
            "all-reduces its MoE output itself (deepseek_v2, qwen3_moe, nemotron_h, ...) still reduces it "
            "again, and where the layer reduces instead its shared experts stay unreduced; only a model "
            "without shared experts that leaves the reduce to the layer escapes"
        )
    else:
        why = (
            f"{backend} ({source}) with EP, DP {dp} and TP {tp} builds {cls}; its MoE layers have ep_size "
            f"{ep_size}, so the output is all-reduced over the TP group again unless output_is_reduced()"
        )
        if chunked is False and chunk_why:
            why += f" ({chunk_why}: not the DP-chunked path)"
    if not choices:
        notes.append(
            f"the scan data does not list the --all2all-backend values of vLLM {version}: not checked against them"
        )
    return {
        "argv": list(argv),
        "all2all_backend": backend,
        "backend_from": source,
        "all2all_backends": choices or None,
        "refused": refused,
        "tensor_parallel_size": tp,
        "data_parallel_size": dp,
        "prefill_context_parallel_size": pcp,
        "expert_parallel": expert_parallel,
        "ep_size": ep_size,
        "uses_affected_class": cls if uses else None,
        "dp_chunked": chunked if uses else None,
        "environment": environment,
        "reduce_runs": runs,
        "conclusive": conclusive,
        "why": why,
        "notes": notes,
    }


# ----------------------------------------------------------------------------- verdict and fix


def pip_install(python: str, *args: str) -> list[str]:
    return [python, "-m", "pip", "install", *args]


def index_base(index_url: str) -> str:
    """Our index as `publish` lays it out: the URL that holds `simple/` and `requirements/`.

    A URL of its `simple/` (what --index-url named before the index held requirements files) means
    the same index.
    """
    base = index_url.rstrip("/")
    return base[: -len("/simple")] if base.endswith("/simple") else base


def overlay_install(python: str, index_url: str, vllm: str, reinstall: bool = False) -> tuple[list[str], list[str]]:
    """docs/overlay.md "Install": our wheel for vLLM `vllm` from the hash-pinned requirements file
    that `publish` writes, our project page the only source; then `pip check`. `reinstall`: over an
    install pip would keep as it is (its record without its package, an impostor of the same version,
    damaged files), only our wheel (`pip check` then checks its requirements)."""
    base = index_base(index_url)
    forced = ["--force-reinstall", "--no-deps"] if reinstall else []
    install = pip_install(
        python,
        *forced,
        "--no-index",
        "--find-links",
        f"{base}/simple/{PROJECT}/",
        "-r",
        f"{base}/requirements/vllm-{vllm}.txt",
    )
    return install, [python, "-m", "pip", "check"]


def fix_for(report: dict[str, Any], index_url: str | None) -> dict[str, Any] | None:
    """The exact command that makes the fix live here, or None when nothing is to be done."""
    if report["verdict"] == "refused":
        serve = report["serve"]
        choices = serve["all2all_backends"] or []
        return _fix(None, f"give vLLM {public_version(report['vllm']['version'])} one of: {', '.join(choices)}")
    release, overlay, python = report["release"], report["overlay"], report["python"]
    if report["verdict"] == "not-affected" and stale_overlay(overlay):
        return _fix(
            [python, "-m", "pip", "uninstall", "-y", PROJECT],
            f"removes {PROJECT} {overlay['version']}: "
            f"vLLM {public_version(report['vllm']['version'])} needs no overlay",
        )
    # not-used, not-affected, fixed-live: nothing to do; cannot-tell: nothing known to do.
    if report["verdict"] not in ("affected", "fixed-not-live"):
        return None
    vllm = public_version(report["vllm"]["version"])
    if release["status"] != "affected":  # fixed upstream, yet overridden (--live): nothing of ours to install
        return _fix(None, "find what serves vLLM's prepare_finalize modules here (see live.classes)")
    if overlay["for_this_vllm"] and not overlay.get("missing_fixes") and not overlay.get("damaged"):
        reason = overlay["reason"] or ""
        if overlay["mode"] == "off":
            return {
                "command": f"unset {MODE_ENV}",
                "argv": None,
                "check": None,
                "why": f"{MODE_ENV}=off disables the overlay",
            }
        if not overlay["activates"] and "flashinfer-python" in reason and overlay["flashinfer_specifier"]:
            return _fix(pip_install(python, f"flashinfer-python{overlay['flashinfer_specifier']}"), reason)
        if overlay["activates"] and not overlay["hook_installed"]:
            return _fix(
                None,
                "start Python without -S, with the overlay's site-packages processed by site "
                "(a .pth file in a PYTHONPATH directory is not run)",
            )
        if not overlay["activates"]:
            return _fix(None, reason)
        return _fix(None, "something else serves vLLM's prepare_finalize modules here (see live.classes)")
    if release["in_train"]:
        index = index_url or INDEX_PLACEHOLDER
        # The pinned requirements file takes our newest wheel for this vLLM by its sha256, from our
        # page alone, and checks the installed vLLM and FlashInfer without replacing them (docs/overlay.md).
        argv, check = overlay_install(python, index, vllm, reinstall=bool(overlay.get("damaged")))
        why = f"installs the overlay for vLLM {vllm} (the newest patch level our index pins, {vllm}+fm.N)"
        if overlay.get("damaged"):
            why += (
                f", over the {overlay['version']} recorded as installed, which pip would otherwise keep "
                "(`Requirement already satisfied`); --no-deps: a forced reinstall would reinstall vLLM and "
                "FlashInfer too, which our page does not hold"
            )
        elif overlay["installed"]:
            why += f", replacing {overlay['version']}"
        why += "; pip check then says that the environment's requirements are met"
        if index == INDEX_PLACEHOLDER:
            why += f"; replace {INDEX_PLACEHOLDER} with our index, or pass --index-url or set {INDEX_ENV}"
        return _fix(argv, why, check)
    if release["fixed_in"]:
        return _fix(
            pip_install(python, f"vllm>={release['fixed_in']}"),
            f"no overlay is published for vLLM {vllm}; vLLM has the fix from {release['fixed_in']}",
        )
    return _fix(None, f"no overlay is published for vLLM {vllm}, and no fixed vLLM release is known")


def _fix(argv: list[str] | None, why: str, check: list[str] | None = None) -> dict[str, Any]:
    command = shlex.join(argv) if argv else None
    if command and check:
        command += f" && {shlex.join(check)}"
    return {"command": command, "argv": argv, "check": check, "why": why}


def judge(report: dict[str, Any]) -> tuple[str, str]:
    """(verdict, summary) from the facts gathered."""
    release, overlay, live, serve = report["release"], report["overlay"], report["live"], report["serve"]
    status = release["status"]
    reduced = None  # what the classes vLLM resolves here say, when --live read them
    if live is not None and not live["error"]:
        found = [c for c in live["classes"].values() if c.get("found")]
        if found:
            reduced = all(c["output_is_reduced"] for c in found)
    if status == "unknown":
        return "cannot-tell", release["why"]
    if serve is not None and serve["refused"]:
        version = public_version(report["vllm"]["version"])
        what = "command line" if serve["refused"].startswith("--") else "environment"
        return "refused", f"vLLM {version} would refuse this {what}: {serve['refused']}"
    if status in ("fixed", "not-affected"):
        if status == "fixed" and reduced is False:
            return "fixed-not-live", (
                f"{release['why']}, but the classes vLLM resolves here return output_is_reduced() False: "
                "something overrides them"
            )
        stale = stale_overlay(overlay)
        return "not-affected", release["why"] + (f"; {stale}" if stale else "")
    # Affected: is our fix for this very release in place, and will vLLM run it?
    ours = overlay["for_this_vllm"]
    missing = overlay.get("missing_fixes") or []
    if ours and missing:
        bugs = release.get("bugs") or {}
        named = "; ".join(f"{bug} ({bugs[bug]['title']})" if bugs.get(bug, {}).get("title") else bug for bug in missing)
        carried = ", ".join(str(p) for p in overlay.get("patches") or []) or "no patch"
        return "affected", (
            f"{release['why']}; the installed overlay {overlay['version']} carries no fix for {named} "
            f"(its patches: {carried})"
        )
    if ours and overlay["activates"] and overlay["hook_installed"] and reduced is not False:
        how = "the classes vLLM resolves say so (--live)" if reduced else "the import hook's own decision"
        return "fixed-live", f"{release['why']}; our fix is live here: {how}"
    if serve is not None and serve["conclusive"] and not serve["reduce_runs"]:
        return "not-used", f"{release['why']}, but this command line does not run it: {serve['why']}"
    if ours:
        if not overlay["activates"]:
            why = f"the overlay does not activate: {overlay['reason']}"
        elif not overlay["hook_installed"]:
            why = "the overlay would activate, but its import hook is not installed in this interpreter"
        else:
            why = "the overlay activates, yet the classes vLLM resolves return output_is_reduced() False"
        return "fixed-not-live", f"{release['why']}; {why}"
    if overlay["installed"]:
        return "affected", f"{release['why']}; the installed overlay does not fix it: {overlay['reason']}"
    if overlay["version"] is not None:  # the record without its package
        return "affected", f"{release['why']}; the fix is not installed: {overlay['reason']}"
    return "affected", f"{release['why']}; the fix is not installed"


def stale_overlay(overlay: dict[str, Any]) -> str | None:
    """Where the release needs no overlay: the one still installed (or its record), which serves nothing."""
    if overlay["version"] is None or (overlay["for_this_vllm"] and not overlay.get("damaged")):
        return None
    if overlay["vllm_tag"] and not overlay["for_this_vllm"]:
        return (
            f"{PROJECT} {overlay['version']} is still installed, built for vLLM {overlay['vllm_tag']}: it serves "
            f"nothing here, and pip check fails on its requirement of vllm=={overlay['vllm_tag'].lstrip('v')}"
        )
    return f"{PROJECT} {overlay['version']} is still installed and serves nothing here: {overlay['reason']}"


def report(
    scan_path: Path | None = None,
    live: bool = False,
    serve: list[str] | None = None,
    index_url: str | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The whole report. `env`: the variables `vllm serve` would have beyond this process's own (--env)."""
    given = dict(env or {})
    vllm, flashinfer = dist_version("vllm"), dist_version("flashinfer-python")
    overlay = overlay_state()
    path, source = find_scan(scan_path, Path(overlay["location"]) if overlay["location"] else None)
    scan, problem = load_scan(path) if path else (None, "no scan data (affected-releases.json) found")
    release = release_facts(scan, problem, vllm)
    compare_fixes(overlay, release)
    data: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "doctor": str(Path(__file__).resolve()),
        "python": sys.executable,
        "vllm": {"version": vllm},
        "flashinfer": {"version": flashinfer},
        "scan": {
            "path": str(path) if path else None,
            "source": source,
            "problem": problem,
            "oldest_scanned": scan["scanned"][0] if scan and scan["scanned"] else None,
            "newest_scanned": scan.get("newest_scanned") if scan else None,
        },
        "release": release,
        "overlay": overlay,
        "live": live_classes(overlay["location"], *live_target(scan, release["line"])) if live else None,
        "serve": serve_layout(
            serve,
            {**os.environ, **given},
            serve_facts(scan, release["line"], public_version(vllm) if vllm else None),
            frozenset(given),
        )
        if serve is not None
        else None,
    }
    return conclude(data, index_url or os.environ.get(INDEX_ENV) or None)


def conclude(data: dict[str, Any], index_url: str | None = None) -> dict[str, Any]:
    """`data` (the facts: release, overlay, live, serve, vllm, python) with its verdict, exit code and fix."""
    data["verdict"], data["summary"] = judge(data)
    data["exit_code"] = EXIT_CODES[data["verdict"]]
    data["fix"] = fix_for(data, index_url)
    data["overlay"].pop("damaged", None)  # said in overlay.reason; the fix has acted on it
    return data


# ----------------------------------------------------------------------------- output


def format_report(data: dict[str, Any]) -> str:
    release, overlay, scan, live, serve, fix = (data[k] for k in ("release", "overlay", "scan", "live", "serve", "fix"))
    rows = [
        ("python", data["python"]),
        ("vLLM", data["vllm"]["version"] or "not installed"),
        ("flashinfer-python", data["flashinfer"]["version"] or "not installed"),
        (
            "scan data",
            f"{scan['path']} ({scan['source']}; {scan['oldest_scanned']} .. {scan['newest_scanned']})"
            if scan["path"] and not scan["problem"]
            else scan["problem"],
        ),
        ("release", f"{release['status'].replace('unknown', 'cannot tell')}: {release['why']}"),
    ]
    for bug, info in (release.get("bugs") or {}).items():
        rows.append(("bug", f"{bug}: {info['status']}" + (f" ({info['title']})" if info["title"] else "")))
    if release["fixed_in"]:
        rows.append(("fixed upstream in", release["fixed_in"]))
    if not overlay["installed"]:
        rows.append(("overlay", f"{PROJECT} not installed" + (f": {overlay['reason']}" if overlay["reason"] else "")))
    else:
        rows.append(
            ("overlay", f"{PROJECT} {overlay['version']} for vLLM {overlay['vllm_tag']}, {overlay['location']}")
        )
        if overlay.get("missing_fixes"):
            rows.append(("overlay lacks", ", ".join(overlay["missing_fixes"])))
        if overlay["activates"]:
            hook = "" if overlay["hook_installed"] else ", but its hook is not installed in this interpreter"
            warning = f"; warning: {overlay['reason']}" if overlay["reason"] else ""
            rows.append(("activates here", f"yes ({MODE_ENV}={overlay['mode'] or 'on'}{hook}){warning}"))
        else:
            rows.append(("activates here", f"no: {overlay['reason']}"))
    if live is not None:
        if live["error"]:
            rows.append(("live", f"importing {live['module']} failed: {live['error']}"))
        for name, cls in live["classes"].items():
            if not cls.get("found"):
                rows.append(("live", f"{name}: not in {live['module']}"))
                continue
            served = "our overlay" if cls["served_by_overlay"] else "vLLM"
            rows.append(("live", f"{name}.output_is_reduced() = {cls['output_is_reduced']}, from {served}"))
            rows.append(("", cls["file"]))
        rows.append(("live import", f"{live['seconds']:.2f} s"))
    if serve is not None:
        rows.append(("command line", f"refused: {serve['refused']}" if serve["refused"] else serve["why"]))
        for name, item in sorted(serve["environment"].items()):
            rows.append(("serve environment", f"{name}={item['value']} (from {item['from']})"))
        rows += [("note", note) for note in serve["notes"]]
    lines = ["vllm-fused-moe doctor", *(f"  {label:<18}{text}" for label, text in rows)]
    lines.append(f"verdict: {data['verdict']} (exit {data['exit_code']}): {data['summary']}")
    if fix:
        lines.append(f"fix: {fix['command']}" if fix["command"] else f"fix: {fix['why']}")
        if fix["command"]:
            lines.append(f"     {fix['why']}")
    return "\n".join(lines)


def env_pair(text: str) -> tuple[str, str]:
    """`NAME=VALUE` of --env; argparse turns the ValueError into a usage error (exit 2)."""
    name, eq, value = text.partition("=")
    if not eq or not name or "\0" in text:
        raise ValueError(text)
    return name, value


def parser(prog: str = "vllm-fused-moe doctor") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Is this environment's vLLM affected by the FlashInfer NVLink double reduce, "
        "and is the fix live? Exit 0: not affected, or fixed and live, or the command line after -- does "
        "not meet the bug; 1: affected and not fixed, or fixed but not live; 2: cannot tell, or vLLM "
        "would refuse the command line (the report says why).",
        usage=f"{prog} [--json] [--live] [--scan FILE] [--index-url URL] [--env NAME=VALUE]... [-- VLLM_SERVE_ARGS...]",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (docs/doctor.schema.json)")
    p.add_argument(
        "--live",
        action="store_true",
        help="also import vLLM's FlashInfer NVLink prepare/finalize classes (as vLLM does: torch and vLLM "
        "are imported, seconds) and read output_is_reduced(); no GPU needed",
    )
    p.add_argument("--scan", type=Path, default=None, help=f"the scan data to read (default: the {SCAN_NAME} shipped)")
    p.add_argument(
        "--index-url",
        default=None,
        help="our package index (where `publish`'s simple/ and requirements/ are served), for the fix command "
        f"(default: ${INDEX_ENV}, else a placeholder)",
    )
    p.add_argument(
        "--env",
        action="append",
        type=env_pair,
        default=[],
        metavar="NAME=VALUE",
        help="a variable of the environment `vllm serve` runs with, over this process's own (repeatable), "
        f"e.g. {DP_CHUNK_ENV}=0 or {MODE_ENV}=off: every check of the doctor reads it",
    )
    return p


def main(argv: list[str] | None = None, prog: str = "vllm-fused-moe doctor") -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    serve = None
    if "--" in args:
        cut = args.index("--")
        args, serve = args[:cut], args[cut + 1 :]
    options = parser(prog).parse_args(args)
    given = dict(options.env)
    # The serve environment is the one every fact is read in: the overlay's switch (VLLM_FUSED_MOE)
    # and, with --live, vLLM's own import see it too. This process exits right after.
    os.environ.update(given)
    data = report(options.scan, options.live, serve, options.index_url, given)
    print(json.dumps(data, indent=2, sort_keys=True) if options.json else format_report(data))
    return int(data["exit_code"])


if __name__ == "__main__":
    # Run as a file from a checkout: its directory must not shadow the installed overlay's modules.
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != here]
    sys.exit(main(prog="doctor.py"))
