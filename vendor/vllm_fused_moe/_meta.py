"""What this build is: the vLLM tag, the verified FlashInfer range and the patch series.

`release build` writes `_build_info.json` into the wheel; in a source checkout (no build)
the same facts are read from UPSTREAM.toml and VERIFIED.toml next to this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

HERE = Path(__file__).resolve().parent
BUILD_INFO = HERE / "_build_info.json"
SUBTREE = HERE / "prepare_finalize"


class PatchInfo(TypedDict):
    name: str
    subject: str
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
    flashinfer_specifier: str
    commit: str
    source_date_epoch: int
    patches: list[PatchInfo]


def load() -> BuildInfo:
    try:
        info: BuildInfo = json.loads(BUILD_INFO.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return _from_source_tree()
    return info


def _from_source_tree() -> BuildInfo:
    import tomllib  # only a source checkout gets here, and the tooling is 3.11+

    upstream = tomllib.loads((HERE / "UPSTREAM.toml").read_text(encoding="utf-8"))["upstream"]
    verified = tomllib.loads((HERE / "VERIFIED.toml").read_text(encoding="utf-8"))["flashinfer-python"]
    tag = str(upstream["tag"])
    return {
        "version": "source",
        "vllm_tag": tag,
        "vllm_version": tag.removeprefix("v"),
        "vllm_wheel": upstream.get("wheel", ""),
        "vllm_wheel_sha256": upstream.get("wheel_sha256", ""),
        "upstream_source": upstream.get("source", ""),
        "upstream_package": str(upstream["subtree"]).replace("/", "."),
        "flashinfer_specifier": str(verified["specifier"]),
        "commit": "",
        "source_date_epoch": 0,
        "patches": [],
    }
