"""A wheel's METADATA and a release's FlashInfer pin: one reader, `packaging`'s, for every stage.

METADATA is an email-style header block (the core metadata spec); `packaging.metadata`, the PyPA's
reference reader of that spec, parses it, and `packaging.requirements.Requirement` reads each
Requires-Dist with its extras and markers. The pristine readers prove a wheel's Version with it
(release/pristine/safe.py), the overlay index reads its own wheels' Name, Version and
Requires-Python with it (release/overlay/index.py), and every source's FlashInfer pin comes out
of `flashinfer_pin`.

Read without `packaging`'s whole-document validation: vLLM's release wheels 0.1.4-0.6.x say
Metadata-Version 2.1 yet carry License-File (a 2.4 field), which the validation refuses, though
every field we read is sound. Each field we read is still parsed, and a bad one is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from packaging.metadata import InvalidMetadata, Metadata, RawMetadata, parse_email
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

FLASHINFER = "flashinfer-python"
# Where the pin is read for: the machines vLLM's CUDA wheels are for (Linux x86_64, CPython) without
# any extra, whatever machine runs the tool. A Requires-Dist under `extra == "flashinfer"` (vLLM
# 0.10.1-0.11.0) pins nothing a plain install gets; a marker on another platform is not ours.
# Python 3.12: the interpreter of vLLM's own images; no FlashInfer requirement of any release so far
# depends on the Python version.
TARGET_ENVIRONMENT = {
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "sys_platform": "linux",
    "os_name": "posix",
    "python_version": "3.12",
    "python_full_version": "3.12.0",
    "implementation_version": "3.12.0",
    "extra": "",
}


class MetadataError(ValueError):
    """METADATA, or one of the fields we read from it, does not parse; the caller says whose it is."""


@dataclass(frozen=True)
class CoreMetadata:
    """The fields of a METADATA file the tooling reads, as written and as parsed."""

    raw: RawMetadata  # every field as written (the Version header, for one)
    parsed: Metadata  # typed access; each field is parsed (and may fail) when read

    @property
    def name(self) -> str:
        return self.raw.get("name", "")

    @property
    def version(self) -> str:
        """The Version header as written ("" when there is none); `packaging.version.Version` parses it."""
        return self.raw.get("version", "")

    @property
    def requires_python(self) -> str:
        return self.raw.get("requires_python", "")

    @property
    def requires_dist(self) -> list[Requirement]:
        try:
            return list(self.parsed.requires_dist or [])
        except InvalidMetadata as exc:
            raise MetadataError(f"a Requires-Dist does not parse ({exc})") from None


def read_metadata(text: str) -> CoreMetadata:
    """Parse METADATA text (decoded by the caller, which says whose it is when it is not UTF-8)."""
    raw, _unparsed = parse_email(text)
    return CoreMetadata(raw, Metadata.from_raw(raw, validate=False))


def flashinfer_pin(requirements: Iterable[Requirement]) -> str:
    """The FlashInfer pin among `requirements`: `flashinfer-python<specifier>`, or "" where none applies.

    The pin is the first requirement on FlashInfer (by its canonical name, so `flashinfer_python`
    counts, and whatever extras it asks for) whose marker holds on TARGET_ENVIRONMENT.
    """
    for requirement in requirements:
        if canonicalize_name(requirement.name) != FLASHINFER:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate(TARGET_ENVIRONMENT):
            continue
        return FLASHINFER + str(requirement.specifier)
    return ""


def metadata_flashinfer_pin(metadata: CoreMetadata) -> str:
    """The pin a release wheel's METADATA states in its Requires-Dist."""
    return flashinfer_pin(metadata.requires_dist)


def requirements_file_pin(text: str) -> str:
    """The pin a source tree's requirements file states (vLLM's requirements/cuda.txt).

    Not parsed by a library: pip's requirements-file parser is internal to pip, and a line of such
    a file that names a package is a PEP 508 requirement, which `Requirement` reads. Options
    (`-r common.txt`, `--extra-index-url`), comments and lines that are no requirement are skipped.
    """
    found: list[Requirement] = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        try:
            found.append(Requirement(line))
        except InvalidRequirement:
            continue
    return flashinfer_pin(found)
