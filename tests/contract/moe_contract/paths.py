"""Where the repository keeps the files the contract is about.

`VLLM_FUSED_MOE_ROOT` points the suite at another checkout's vendor/ and patches/ (the
`contract` nox session rebases a scratch copy onto each train tag and runs there).
"""

import importlib.util
import os
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ReleaseLine:
    """Where one release line (patches/lines.toml) keeps the two FlashInfer NVLink modules.

    The suite names the modules by their head-line names (`FLASHINFER_NVLINK_CLASSES`);
    `upstream_file` maps one to the file the installed release has. `vendored` is None for
    an older line: vendor/ holds the head line only, so its patched files are made the way
    the overlay build makes them, by applying the line's patch to the installed release's
    files (prepare_finalize_sources.py).
    """

    name: str
    package: str
    suffix: str  # appended to the module name in the release's file name
    patch: Path
    vendored: Path | None

    @property
    def directory(self) -> Path:
        return Path(*self.package.split("."))

    def upstream_module(self, module: str) -> str:
        return f"{self.package}.{module}{self.suffix}"

    def upstream_file(self, module: str) -> Path:
        return self.directory / f"{module}{self.suffix}.py"


FUSED_MOE_PACKAGE = "vllm.model_executor.layers.fused_moe"
HEAD_LINE = ReleaseLine("prepare_finalize", UPSTREAM_PACKAGE, "", PATCH_0001, VENDORED_PREPARE_FINALIZE)
LINES = (
    HEAD_LINE,
    # v0.18.x: the same classes, byte for byte, directly under fused_moe/.
    ReleaseLine(
        "flashinfer_nvlink",
        FUSED_MOE_PACKAGE,
        "_prepare_finalize",
        REPO_ROOT / "patches" / "lines" / "flashinfer_nvlink" / "0001-flashinfer-nvlink-output-is-reduced.patch",
        None,
    ),
)


def installed_vllm_root() -> Path | None:
    """The installed vllm package's directory, found without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def release_line() -> ReleaseLine:
    """The line of the installed vLLM, by which files it has (never by its version)."""
    root = installed_vllm_root()
    if root is not None:
        for line in LINES:
            if (root.parent / line.upstream_file("flashinfer_nvlink_two_sided")).is_file():
                return line
    return HEAD_LINE
