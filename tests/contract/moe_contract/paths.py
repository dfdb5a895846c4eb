"""Where the repository keeps the files the contract is about."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
VENDORED_PREPARE_FINALIZE = REPO_ROOT / "vendor" / "vllm_fused_moe" / "prepare_finalize"
PATCH_0001 = REPO_ROOT / "patches" / "0001-flashinfer-nvlink-output-is-reduced.patch"
VERIFIED_TOML = REPO_ROOT / "vendor" / "vllm_fused_moe" / "VERIFIED.toml"

UPSTREAM_PACKAGE = "vllm.model_executor.layers.fused_moe.prepare_finalize"
UPSTREAM_DIR = Path(*UPSTREAM_PACKAGE.split("."))

# The two modules whose output_is_reduced() patch 0001 changes, and their classes.
FLASHINFER_NVLINK_CLASSES: dict[str, str] = {
    "flashinfer_nvlink_two_sided": "FlashInferNVLinkTwoSidedPrepareAndFinalize",
    "flashinfer_nvlink_one_sided": "FlashInferNVLinkOneSidedPrepareAndFinalize",
}
