"""The installed overlay's evidence, read from the index it was published to (`INDEX_DIR/evidence/<wheel>.json`).

`publish` keeps beside each wheel what it proved: per bug, its regression test on the pristine vLLM
release (it failed: the release has the bug) and with the wheel installed (it passed). The doctor
knows the index only when told (--index-url, or VLLM_FUSED_MOE_OVERLAY_INDEX_URL); it reads the file
of the installed wheel once, bounded and with a timeout, over file://, http:// or https://. Stdlib
only; a file it cannot read is a finding (`problem`), never a crash.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from importlib import metadata

from .records import EvidenceBug, EvidenceRead
from .verdict import index_base
from .words import PROJECT

EVIDENCE_LIMIT = 1 << 20  # what publish writes is a few kB
TIMEOUT_S = 10.0
DEFAULT_TAG = "py3-none-any"


def wheel_name(version: str) -> str:
    """The file name of the installed wheel: our name, its version and the tag its WHEEL file names."""
    tag = DEFAULT_TAG
    try:
        text = metadata.distribution(PROJECT).read_text("WHEEL") or ""
    except (metadata.PackageNotFoundError, OSError):
        text = ""
    tags = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")]
    if len(tags) == 1 and tags[0]:
        tag = tags[0]
    return f"{PROJECT.replace('-', '_')}-{version}-{tag}.whl"


def read_evidence(index_url: str, wheel: str, timeout: float = TIMEOUT_S) -> EvidenceRead:
    url = f"{index_base(index_url)}/evidence/{wheel}.json"
    if not url.startswith(("file://", "http://", "https://")):
        return EvidenceRead(url, wheel, problem="the index URL is not file://, http:// or https://")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # the schemes are checked above
            data = answer.read(EVIDENCE_LIMIT + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return EvidenceRead(url, wheel, problem=f"not read: {getattr(exc, 'reason', None) or exc}")
    if len(data) > EVIDENCE_LIMIT:
        return EvidenceRead(url, wheel, problem=f"larger than the {EVIDENCE_LIMIT} bytes evidence may have")
    try:
        record = json.loads(data)
    except ValueError:
        return EvidenceRead(url, wheel, problem="not JSON")
    return from_record(url, wheel, record)


def from_record(url: str, wheel: str, record: object) -> EvidenceRead:
    if not isinstance(record, dict) or not isinstance(record.get("bugs"), list):
        return EvidenceRead(url, wheel, problem="not the evidence publish writes")
    built = record.get("wheel")
    built = built if isinstance(built, dict) else {}
    named = built.get("name")
    if named != wheel:
        return EvidenceRead(url, wheel, problem=f"the evidence of {named!r}, not of {wheel}")
    vllm = record.get("vllm")
    vllm = vllm if isinstance(vllm, dict) else {}
    bugs = tuple(
        EvidenceBug(str(b.get("bug")), str(b.get("verdict")), str(b.get("test", "")))
        for b in record["bugs"]
        if isinstance(b, dict)
    )
    return EvidenceRead(
        url,
        wheel,
        found=True,
        wheel_sha256=str(built.get("sha256") or "") or None,
        vllm_tag=str(vllm.get("tag") or "") or None,
        line=str(record.get("line") or "") or None,
        bugs=bugs,
    )
