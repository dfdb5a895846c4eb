"""Run inside the serving environment's interpreter: print what is installed and whether the fix is live.

Standalone on purpose (stdlib + whatever is installed there): `python probe_env.py` prints one
JSON object. "Fix active" is read from the behaviour that the fix changes -- the
output_is_reduced() of vLLM's FlashInfer all-to-all prepare/finalize classes, which PR #41382
turns from False to True -- so it holds however the overlay wheel takes effect.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from importlib import metadata

DISTRIBUTIONS = ("vllm", "vllm-fused-moe", "flashinfer-python", "torch")
FUSED_MOE = "vllm.model_executor.layers.fused_moe"
TWO_SIDED = "FlashInferNVLinkTwoSidedPrepareAndFinalize"
ONE_SIDED = "FlashInferNVLinkOneSidedPrepareAndFinalize"
# Where each backend's prepare/finalize class lives, newest release line first
# (patches/lines.toml); the first module the installed vLLM has is the one it uses.
CLASSES: dict[str, tuple[tuple[str, str], ...]] = {
    "flashinfer_nvlink_two_sided": (
        (f"{FUSED_MOE}.prepare_finalize.flashinfer_nvlink_two_sided", TWO_SIDED),
        (f"{FUSED_MOE}.flashinfer_nvlink_two_sided_prepare_finalize", TWO_SIDED),
    ),
    "flashinfer_nvlink_one_sided": (
        (f"{FUSED_MOE}.prepare_finalize.flashinfer_nvlink_one_sided", ONE_SIDED),
        (f"{FUSED_MOE}.flashinfer_nvlink_one_sided_prepare_finalize", ONE_SIDED),
    ),
    # An alias of two-sided from 0.18.0; before, a class of its own.
    "flashinfer_all2allv": (
        (f"{FUSED_MOE}.prepare_finalize.flashinfer_nvlink_two_sided", TWO_SIDED),
        (f"{FUSED_MOE}.flashinfer_nvlink_two_sided_prepare_finalize", TWO_SIDED),
        (f"{FUSED_MOE}.flashinfer_a2a_prepare_finalize", "FlashInferA2APrepareAndFinalize"),
        (f"{FUSED_MOE}.flashinfer_cutlass_prepare_finalize", "FlashInferAllToAllMoEPrepareAndFinalize"),
    ),
}


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def output_is_reduced(candidates: tuple[tuple[str, str], ...]) -> bool | str:
    for module_name, class_name in candidates:
        try:
            if importlib.util.find_spec(module_name) is None:
                continue
        except ModuleNotFoundError:  # a parent package this release does not have
            continue
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
            # The method reads no instance state in any release, so no instance is
            # built (building one needs a GPU and a process group).
            return bool(cls.output_is_reduced(None))
        except Exception as err:
            return f"{type(err).__name__}: {err}"
    return "ModuleNotFoundError: none of " + ", ".join(f"{m}.{c}" for m, c in candidates)


def main() -> None:
    report = {
        "versions": {name: installed_version(name) for name in DISTRIBUTIONS},
        "output_is_reduced": {backend: output_is_reduced(where) for backend, where in CLASSES.items()},
    }
    print("GSM8K-PROBE " + json.dumps(report))


if __name__ == "__main__":
    main()
