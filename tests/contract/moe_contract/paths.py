"""Where the repository keeps the files the contract is about.

`VLLM_FUSED_MOE_ROOT` points the suite at another checkout's vendor/ and patches/ (the
`contract` nox session rebases a scratch copy onto each train tag and runs there).
"""

import os
from pathlib import Path

CONTRACT_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = Path(os.environ.get("VLLM_FUSED_MOE_ROOT") or CONTRACT_DIR.parents[1]).resolve()
VENDORED_PREPARE_FINALIZE = REPO_ROOT / "vendor" / "vllm_fused_moe" / "prepare_finalize"
PATCH_0001 = REPO_ROOT / "patches" / "0001-flashinfer-nvlink-output-is-reduced.patch"
VERIFIED_TOML = REPO_ROOT / "vendor" / "vllm_fused_moe" / "VERIFIED.toml"
# Train tags grouped by identical code under test (moe_contract/code_under_test.py).
CONTRACT_GROUPS = CONTRACT_DIR / "groups.toml"

UPSTREAM_PACKAGE = "vllm.model_executor.layers.fused_moe.prepare_finalize"
UPSTREAM_DIR = Path(*UPSTREAM_PACKAGE.split("."))

# The two modules whose output_is_reduced() patch 0001 changes, and their classes.
FLASHINFER_NVLINK_CLASSES: dict[str, str] = {
    "flashinfer_nvlink_two_sided": "FlashInferNVLinkTwoSidedPrepareAndFinalize",
    "flashinfer_nvlink_one_sided": "FlashInferNVLinkOneSidedPrepareAndFinalize",
}
