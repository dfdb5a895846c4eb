"""What a release's metadata pins: its FlashInfer requirement, read by every reader of a release."""

from __future__ import annotations

import re

FLASHINFER_RE = re.compile(r"^flashinfer-python\s*(?P<spec>[=<>!~][^;#\s]*)", re.M | re.I)


def flashinfer_pin(requirements_text: str) -> str:
    for line in requirements_text.splitlines():
        line = line.removeprefix("Requires-Dist:").strip()
        match = FLASHINFER_RE.match(line)
        if match and "extra ==" not in line:
            return "flashinfer-python" + match.group("spec")
    return ""
