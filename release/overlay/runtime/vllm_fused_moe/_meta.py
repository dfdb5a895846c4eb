"""What this build is: the vLLM tag, the verified FlashInfer range and the patch series.

`release build` writes `_build_info.json` into the wheel; in a source checkout (no build)
the same facts are read from UPSTREAM.toml and VERIFIED.toml next to this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

HERE = Path(__file__).resolve().parent
# The same name as release/core/layout.py BUILD_INFO_NAME, which the tooling reads and writes: this module
# ships in the wheel, where release/ is not, so it names the file itself (tests/unit/test_model.py holds them equal).
BUILD_INFO = HERE / "_build_info.json"
SUBTREE = HERE / "prepare_finalize"


class BuildInfoError(RuntimeError):
    """_build_info.json (or, in a source checkout, UPSTREAM.toml) cannot be read: the install is damaged."""


class PatchInfo(TypedDict, total=False):
    name: str
    subject: str
    bug: str  # the id or URL of the bug it fixes, "" for a downstream change (builds before it: see trailers)
    trailers: dict[str, str]


class BuildInfo(TypedDict):
    """The keys of `_build_info.json` (written by release/overlay/build.py, read here)."""

    version: str
    vllm_tag: str
    vllm_version: str
    vllm_wheel: str
    vllm_wheel_sha256: str
    upstream_source: str
    upstream_package: str
    flashinfer_pin: str  # the tag's own pin, from vLLM's METADATA
    flashinfer_specifier: str  # what the wheel requires: the pin ∩ VERIFIED.toml
    commit: str
    source_date_epoch: int
    patches: list[PatchInfo]
    # {upstream module name: its path in this package}; a package's path ends in "/". Builds
    # before release lines had none: then the head's prepare_finalize package (see targets()).
    targets: dict[str, str]
    dirty: list[str]  # why the tree was not its commit (`build --allow-dirty`); empty for a clean build
    # {path below this package: sha256} of every file the build serves (the targets' files); the
    # hook serves nothing unless each is there with these bytes. Builds before it had none.
    files: dict[str, str]


def load() -> BuildInfo:
    try:
        info: BuildInfo = json.loads(BUILD_INFO.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return _from_source_tree()
    except (OSError, ValueError) as exc:  # ValueError: bad JSON and bad UTF-8 alike
        raise BuildInfoError(f"{BUILD_INFO} is unreadable ({type(exc).__name__}: {exc})") from None
    if not isinstance(info, dict) or not all(key in info for key in ("version", "vllm_tag", "vllm_version")):
        raise BuildInfoError(f"{BUILD_INFO} is not the build info of vllm-fused-moe")
    return info


_TARGETS: dict[str, str] | None = None


def targets() -> dict[str, str]:
    """What this build serves under vLLM's names: {module name: path below this package}."""
    global _TARGETS
    if _TARGETS is None:
        info = load()
        found = info.get("targets")
        package = info.get("upstream_package") or "vllm.model_executor.layers.fused_moe.prepare_finalize"
        _TARGETS = dict(found) if found else {package: SUBTREE.name + "/"}
    return _TARGETS


def _from_source_tree() -> BuildInfo:
    try:
        import tomllib  # only a source checkout gets here, and the tooling is 3.11+

        upstream = tomllib.loads((HERE / "UPSTREAM.toml").read_text(encoding="utf-8"))["upstream"]
        verified = tomllib.loads((HERE / "VERIFIED.toml").read_text(encoding="utf-8"))["flashinfer-python"]
    except (ImportError, OSError, ValueError, KeyError) as exc:
        # An installed wheel always has _build_info.json; without it the package was damaged.
        raise BuildInfoError(f"{BUILD_INFO} is missing and the source files cannot stand in ({exc!r})") from None
    tag = str(upstream["tag"])
    pin = str(upstream.get("flashinfer", "")).removeprefix("flashinfer-python")
    # What `release build` requires for this tag: the tag's own pin ∩ the verified versions.
    inside = [str(v["version"]) for v in verified["verified"] if _satisfies(str(v["version"]), pin)]
    return {
        "version": "source",
        "vllm_tag": tag,
        "vllm_version": tag.removeprefix("v"),
        "vllm_wheel": upstream.get("wheel", ""),
        "vllm_wheel_sha256": upstream.get("wheel_sha256", ""),
        "upstream_source": upstream.get("source", ""),
        "flashinfer_pin": str(upstream.get("flashinfer", "")),
        "upstream_package": str(upstream["subtree"]).replace("/", "."),
        "targets": {str(upstream["subtree"]).replace("/", "."): SUBTREE.name + "/"},
        "flashinfer_specifier": _range(pin, inside),
        "commit": "",
        "source_date_epoch": 0,
        "patches": [],
        "dirty": [],
        "files": {},  # a source checkout: what is there is what is served (`check` guards it)
    }


def _satisfies(version: str, specifier: str) -> bool:
    if not specifier:
        return True
    try:
        from packaging.specifiers import SpecifierSet
    except ImportError:  # only an exact pin can be judged without packaging
        return specifier == f"=={version}"
    return SpecifierSet(specifier).contains(version, prereleases=True)


def _range(pin: str, inside: list[str]) -> str:
    """The same range `release build` writes (release/queue/verified.py: range_for)."""
    if len(inside) == 1:
        return f"=={inside[0]}"
    if not inside:
        return "===none-verified"  # no version is verified for this tag: every installed one is outside
    try:
        from packaging.version import Version

        ordered = sorted(inside, key=Version)
    except ImportError:
        ordered = sorted(inside)
    return ",".join(part for part in (pin, f">={ordered[0]}", f"<={ordered[-1]}") if part)
