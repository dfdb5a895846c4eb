"""The doctor's names and words: what it looks for, its verdicts and the release statuses it reads."""

from __future__ import annotations

from enum import Enum

REPORT_SCHEMA = 1
SCAN_SCHEMA = 1
SCAN_NAME = "affected-releases.json"
PROJECT = "vllm-fused-moe"
PACKAGE = "vllm_fused_moe"
MODE_ENV = "VLLM_FUSED_MOE"  # the same name as vllm_fused_moe.MODE_ENV; not imported so a bare run works
# Our overlay index (where `publish` writes is served), for the fix command. Not the tooling's
# VLLM_FUSED_MOE_INDEX_URL, which names the index of vLLM's release wheels (release/pristine/index.py):
# two things, two names, so a PyPI URL set for the tooling never becomes our --find-links.
INDEX_ENV = "VLLM_FUSED_MOE_OVERLAY_INDEX_URL"
INDEX_PLACEHOLDER = "<INDEX_URL>"

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

EXIT_OK = 0
EXIT_AFFECTED = 1
EXIT_CANNOT_TELL = 2


class Verdict(str, Enum):
    """docs/doctor.md, "Verdicts and exit codes" (`str, Enum`: StrEnum is Python 3.11)."""

    NOT_AFFECTED = "not-affected"
    FIXED_LIVE = "fixed-live"
    NOT_USED = "not-used"
    AFFECTED = "affected"
    FIXED_NOT_LIVE = "fixed-not-live"
    DAMAGED = "damaged"  # live now, but pip keeps the install as it is and can neither upgrade nor remove it
    CANNOT_TELL = "cannot-tell"
    REFUSED = "refused"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.value]


EXIT_CODES = {
    Verdict.NOT_AFFECTED.value: EXIT_OK,
    Verdict.FIXED_LIVE.value: EXIT_OK,
    Verdict.NOT_USED.value: EXIT_OK,
    Verdict.AFFECTED.value: EXIT_AFFECTED,
    Verdict.FIXED_NOT_LIVE.value: EXIT_AFFECTED,
    Verdict.DAMAGED.value: EXIT_AFFECTED,
    Verdict.CANNOT_TELL.value: EXIT_CANNOT_TELL,
    Verdict.REFUSED.value: EXIT_CANNOT_TELL,
}


class Status(str, Enum):
    """A release's status in the scan data; `unknown`: the data cannot say (release.why says why)."""

    AFFECTED = "affected"
    FIXED = "fixed"
    NOT_AFFECTED = "not-affected"
    UNKNOWN = "unknown"


class ScanSource(str, Enum):
    """Where the scan data read came from (`scan.source`)."""

    GIVEN = "given with --scan"
    BESIDE = "shipped beside the doctor"
    OVERLAY = "shipped in the installed overlay"
    NONE = "none found"


class BackendFrom(str, Enum):
    """Where the all2all backend of a command line came from (`serve.backend_from`)."""

    FLAG = "--all2all-backend"
    ENV = BACKEND_ENV
    DEFAULT = "vLLM's default"


class BackendEnv(str, Enum):
    """How a release reads VLLM_ALL2ALL_BACKEND (the scan data's `backend_env` of a serve range)."""

    OVERRIDES = "overrides"  # over --all2all-backend whenever set
    FALLBACK = "fallback"  # only without --all2all-backend
    IGNORED = "ignored"
