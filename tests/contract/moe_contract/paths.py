"""Where the repository keeps the files the contract is about."""

import dataclasses
import functools
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from release.model.lines import read_lines
from release.model.patch import Patch
from release.model.pin import Pin
from release.model.series import EntryKind, Series

CONTRACT_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = CONTRACT_DIR.parents[1]
VENDORED_PREPARE_FINALIZE = REPO_ROOT / "vendor" / "vllm_fused_moe" / "prepare_finalize"
VERIFIED_TOML = REPO_ROOT / "vendor" / "vllm_fused_moe" / "VERIFIED.toml"
UPSTREAM_TOML = REPO_ROOT / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml"
# Train tags grouped by identical code under test (moe_contract/code_under_test.py).
CONTRACT_GROUPS = CONTRACT_DIR / "groups.toml"

UPSTREAM_PACKAGE = "vllm.model_executor.layers.fused_moe.prepare_finalize"
UPSTREAM_DIR = Path(*UPSTREAM_PACKAGE.split("."))

# Which FlashInfer combine a class's finalize() runs (cpu_moe_layer.py runs the same on CPU).
TWO_SIDED = "two_sided"  # MnnvlMoe.mnnvl_moe_alltoallv_combine: a torch.sum over the top-k slots
ONE_SIDED = "one_sided"  # the one-sided CUDA kernel's pairwise top-k sum


@dataclass(frozen=True)
class FixedClass:
    """One prepare/finalize class whose output_is_reduced() a line's patch makes True.

    `module` is the key the suite names it by: its file name without the line's `suffix`.
    `backend` is the all2all backend that makes vLLM build it, `kernels_flag` the
    FusedMoEParallelConfig property that says that backend is in use for a layout.
    `overlap`: whether vLLM runs the shared experts inside the MoE op with this backend
    (FusedMoE's / SharedFusedMoE's `use_overlapped`; False where it says "flashinfer with
    DP, nothing to gain").
    """

    module: str
    name: str
    backend: str
    kernels_flag: str
    combine: str
    overlap: bool


@dataclass(frozen=True)
class ReleaseLine:
    """Where one release line (patches/lines.toml) keeps the classes the queue's fix (or its variant) fixes.

    `upstream_file` maps a class's module key to the file the installed release has.
    `unchanged` are classes in the same modules that the fix must leave alone (an all-gather
    class sharing a base with a fixed one): (module key, class name). `vendored` is None for
    an older line, and for the head line's other tags: vendor/ holds one tag of the head line
    only, so their patched files are made the way the overlay build makes them, by applying the
    line's patch to the installed release's files (prepare_finalize_sources.py).
    """

    name: str
    package: str
    suffix: str  # appended to the module key in the release's file name
    vendored: Path | None
    classes: tuple[FixedClass, ...]
    unchanged: tuple[tuple[str, str], ...] = ()

    @property
    def directory(self) -> Path:
        return Path(*self.package.split("."))

    @property
    def modules(self) -> tuple[str, ...]:
        """The module keys of the fixed classes, in order, each once."""
        return tuple(dict.fromkeys(cls.module for cls in self.classes))

    @property
    def patch(self) -> Path:
        """The patch of the line's series that changes its classes' files (`line.patch`: the head's, or the line's
        variant): found by what it changes, never by its file name, so a renamed or renumbered patch is found."""
        return _line_patch(self.name, frozenset(str(self.upstream_file(module)) for module in self.modules))

    def upstream_module(self, module: str) -> str:
        return f"{self.package}.{module}{self.suffix}"

    def upstream_file(self, module: str) -> Path:
        return self.directory / f"{module}{self.suffix}.py"


FUSED_MOE_PACKAGE = "vllm.model_executor.layers.fused_moe"
PATCHES = REPO_ROOT / "patches"
NVLINK_CLASSES = (
    FixedClass(
        "flashinfer_nvlink_two_sided",
        "FlashInferNVLinkTwoSidedPrepareAndFinalize",
        "flashinfer_nvlink_two_sided",
        "use_fi_nvl_two_sided_kernels",
        TWO_SIDED,
        overlap=False,
    ),
    FixedClass(
        "flashinfer_nvlink_one_sided",
        "FlashInferNVLinkOneSidedPrepareAndFinalize",
        "flashinfer_nvlink_one_sided",
        "use_fi_nvl_one_sided_kernels",
        ONE_SIDED,
        overlap=True,
    ),
)
HEAD_LINE = ReleaseLine("prepare_finalize", UPSTREAM_PACKAGE, "", VENDORED_PREPARE_FINALIZE, NVLINK_CLASSES)
LINES = (
    HEAD_LINE,
    # v0.18.x: the same classes, byte for byte, directly under fused_moe/.
    ReleaseLine(
        "flashinfer_nvlink",
        FUSED_MOE_PACKAGE,
        "_prepare_finalize",
        None,
        NVLINK_CLASSES,
    ),
    # v0.16.0-v0.17.1: one class for the flashinfer_all2allv backend, combining two-sided.
    ReleaseLine(
        "flashinfer_a2a",
        FUSED_MOE_PACKAGE,
        "_prepare_finalize",
        None,
        (
            FixedClass(
                "flashinfer_a2a",
                "FlashInferA2APrepareAndFinalize",
                "flashinfer_all2allv",
                "use_fi_all2allv_kernels",
                TWO_SIDED,
                overlap=False,
            ),
        ),
    ),
    # v0.11.1-v0.15.1: the a2a class inherits output_is_reduced() from the base it shares
    # with the all-gather class; the fix adds an override to the a2a class only. The
    # parallel config has no flag of its own for the backend yet: all2all kernels are in
    # use (DP > 1 with EP) and the backend is named.
    ReleaseLine(
        "flashinfer_cutlass",
        FUSED_MOE_PACKAGE,
        "_prepare_finalize",
        None,
        (
            FixedClass(
                "flashinfer_cutlass",
                "FlashInferAllToAllMoEPrepareAndFinalize",
                "flashinfer_all2allv",
                "use_all2all_kernels",
                TWO_SIDED,
                overlap=False,
            ),
        ),
        unchanged=(("flashinfer_cutlass", "FlashInferAllGatherMoEPrepareAndFinalize"),),
    ),
)


@functools.cache
def _line_patch(line: str, files: frozenset[str]) -> Path:
    """The first patch `line`'s series applies (patches/series for the head line) that changes one of `files`."""
    found = read_lines(PATCHES / "lines.toml").get(line)
    series_path = found.series_path(REPO_ROOT)
    head = series_path == PATCHES / "series"
    for entry in Series.load(series_path, None if head else PATCHES).entries:
        if entry.kind not in (EntryKind.PATCH, EntryKind.TAKE):
            continue  # skipped, or retired at the head: not what the line's releases are patched with
        folder = found.patch_dir(REPO_ROOT) if entry.kind == EntryKind.PATCH and not head else PATCHES
        path = folder / entry.name
        if files & set(Patch(entry.name, path.read_text(encoding="utf-8")).files):
            return path
    raise LookupError(f"{series_path} applies no patch to {sorted(files)}")


def installed_vllm_root() -> Path | None:
    """The installed vllm package's directory, found without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def release_line() -> ReleaseLine:
    """The line of the installed vLLM, by which files it has (never by its version).

    vendor/ is the head line's patched files of one tag (UPSTREAM.toml's): with any other tag of
    the head line installed, ours are built from that release's files, as for an older line
    (`vendored` None), and test_sources.py holds them to the train's hashes for the tag.
    """
    root = installed_vllm_root()
    if root is not None:
        for line in LINES:
            if all((root.parent / line.upstream_file(module)).is_file() for module in line.modules):
                if line.vendored is not None and not _vendor_is_of_installed_vllm():
                    return dataclasses.replace(line, vendored=None)
                return line
    return HEAD_LINE


def _vendor_is_of_installed_vllm() -> bool:
    return importlib.metadata.version("vllm") == Pin.load(UPSTREAM_TOML).version
