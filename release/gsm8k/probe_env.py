"""Run inside the serving environment's interpreter: print what is installed and whether the fix is live.

Standalone on purpose (stdlib + whatever is installed there): `python probe_env.py` prints one
JSON object. "Fix active" is read from the behaviour that the fix changes -- the
output_is_reduced() of vLLM's FlashInfer NVLink prepare/finalize classes, which PR #41382
turns from False to True -- so it holds however the overlay wheel takes effect.
"""

from __future__ import annotations

import importlib
import json
from importlib import metadata

DISTRIBUTIONS = ("vllm", "vllm-fused-moe", "flashinfer-python", "torch")
CLASSES = {
    "flashinfer_nvlink_two_sided": (
        "vllm.model_executor.layers.fused_moe.prepare_finalize.flashinfer_nvlink_two_sided",
        "FlashInferNVLinkTwoSidedPrepareAndFinalize",
    ),
    "flashinfer_nvlink_one_sided": (
        "vllm.model_executor.layers.fused_moe.prepare_finalize.flashinfer_nvlink_one_sided",
        "FlashInferNVLinkOneSidedPrepareAndFinalize",
    ),
}


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def output_is_reduced(module_name: str, class_name: str) -> bool | str:
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
        # The method reads no instance state in either version, so no instance is
        # built (building one needs a GPU and a process group).
        return bool(cls.output_is_reduced(None))
    except Exception as err:
        return f"{type(err).__name__}: {err}"


def main() -> None:
    report = {
        "versions": {name: installed_version(name) for name in DISTRIBUTIONS},
        "output_is_reduced": {backend: output_is_reduced(*where) for backend, where in CLASSES.items()},
    }
    print("GSM8K-PROBE " + json.dumps(report))


if __name__ == "__main__":
    main()
