"""What this build is: the vLLM tag, the verified FlashInfer range and the patch series.

`release build` writes `_build_info.json` into the wheel; in a source checkout (no build)
the same facts are read from UPSTREAM.toml and VERIFIED.toml next to this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BUILD_INFO = HERE / "_build_info.json"
SUBTREE = HERE / "prepare_finalize"


class BuildInfoError(RuntimeError):
    """_build_info.json (or, in a source checkout, UPSTREAM.toml) cannot be read: the install is damaged."""


def load() -> dict[str, Any]:
    try:
        info = json.loads(BUILD_INFO.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return _from_source_tree()
    except (OSError, ValueError) as exc:  # ValueError: bad JSON and bad UTF-8 alike
        raise BuildInfoError(f"{BUILD_INFO} is unreadable ({type(exc).__name__}: {exc})") from None
    if not isinstance(info, dict) or not all(key in info for key in ("version", "vllm_tag", "vllm_version")):
        raise BuildInfoError(f"{BUILD_INFO} is not the build info of vllm-fused-moe")
    return info


def _from_source_tree() -> dict[str, Any]:
    try:
        import tomllib  # only a source checkout gets here, and the tooling is 3.11+

        upstream = tomllib.loads((HERE / "UPSTREAM.toml").read_text(encoding="utf-8"))["upstream"]
        verified = tomllib.loads((HERE / "VERIFIED.toml").read_text(encoding="utf-8"))["flashinfer-python"]
    except (ImportError, OSError, ValueError, KeyError) as exc:
        # An installed wheel always has _build_info.json; without it the package was damaged.
        raise BuildInfoError(f"{BUILD_INFO} is missing and the source files cannot stand in ({exc!r})") from None
    tag = str(upstream["tag"])
    return {
        "version": "source",
        "vllm_tag": tag,
        "vllm_version": tag.removeprefix("v"),
        "vllm_wheel": upstream.get("wheel", ""),
        "vllm_wheel_sha256": upstream.get("wheel_sha256", ""),
        "upstream_source": upstream.get("source", ""),
        "flashinfer_specifier": str(verified["specifier"]),
        "commit": "",
        "source_date_epoch": 0,
        "patches": [],
    }
