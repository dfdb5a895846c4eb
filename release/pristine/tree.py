"""One tag's pristine subtree and where it came from, plus what the release's metadata pins."""

from __future__ import annotations

import re
from dataclasses import dataclass

from release.core.hashing import sha256_hex

FLASHINFER_RE = re.compile(r"^flashinfer-python\s*(?P<spec>[=<>!~][^;#\s]*)", re.M | re.I)


@dataclass
class UpstreamTree:
    """One tag's pristine subtree and where it came from."""

    tag: str
    source: str
    files: dict[str, bytes]
    flashinfer: str = ""
    wheel: str = ""
    wheel_sha256: str = ""
    commit: str = ""
    # True when wheel_sha256 was computed on the whole file the files were read from; False where it
    # is only the index's claim (a lazy read), which may be compared with a record but never recorded.
    wheel_verified: bool = False

    def file_hashes(self) -> dict[str, str]:
        return {name: sha256_hex(data) for name, data in sorted(self.files.items())}


def _metadata_field(metadata: str, name: str) -> str:
    match = re.search(rf"^{name}: (.*)$", metadata, re.M)
    return match.group(1).strip() if match else ""


def _flashinfer_pin(requirements_text: str) -> str:
    for line in requirements_text.splitlines():
        line = line.removeprefix("Requires-Dist:").strip()
        match = FLASHINFER_RE.match(line)
        if match and "extra ==" not in line:
            return "flashinfer-python" + match.group("spec")
    return ""
