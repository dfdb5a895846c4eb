"""The installed overlay's evidence, read from the index it was published to (`INDEX_DIR/evidence/<wheel>.json`).

`publish` keeps beside each wheel what it proved: per bug, its regression test on the pristine vLLM
release (it failed: the release has the bug) and with the wheel installed (it passed). The doctor
knows the index only when told (--index-url, or VLLM_FUSED_MOE_OVERLAY_INDEX_URL); it reads the file
of the installed wheel over file://, http:// or https://, bounded in bytes and in time (reading.py).
A file it cannot read is a finding (`problem`), never a crash.

Evidence counts only for the wheel installed here (binding.py): the evidence must name the wheel the
index serves under the installed name by its sha256, the installed files must be that wheel's, and
each bug the release has must be `fixed` in it. Anything else is a `problem` naming what disagrees.
"""

from __future__ import annotations

import json
from importlib import metadata

from .binding import binding_problem
from .reading import ReadFailed, read_url, shown
from .records import EvidenceBug, EvidenceRead
from .verdict import index_base
from .words import PROJECT

EVIDENCE_LIMIT = 1 << 20  # what publish writes is a few kB
TIMEOUT_S = 10.0  # for the whole answer, not per read
DEFAULT_TAG = "py3-none-any"
FIXED, NOT_AFFECTED = "fixed", "not affected"  # release/evidence/gather.py's verdicts that prove


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


def read_evidence(
    index_url: str, wheel: str, timeout: float = TIMEOUT_S, needs: tuple[str, ...] = (), bind: bool = True
) -> EvidenceRead:
    """The evidence of `wheel` in the index, bound to the install here (`bind`) and to the bugs the release
    has (`needs`): a `problem` where it is not."""
    url = f"{index_base(index_url)}/evidence/{wheel}.json"
    said = shown(url)
    try:
        data = read_url(url, EVIDENCE_LIMIT, timeout)
    except ReadFailed as exc:
        return EvidenceRead(said, wheel, problem=str(exc))
    try:
        record = json.loads(data)
    except RecursionError:
        return EvidenceRead(said, wheel, problem="not JSON: nested too deeply to read")
    except ValueError:
        return EvidenceRead(said, wheel, problem="not JSON")
    read = from_record(said, wheel, record)
    if not read.found:
        return read
    problem = proof_problem(read, needs) or (binding_problem(index_url, read, timeout) if bind else None)
    return EvidenceRead(read.url, read.wheel, True, problem, read.wheel_sha256, read.vllm_tag, read.line, read.bugs)


def text(value: object) -> str | None:
    """A field of the record that must be a string: the string, else None (a list, a number: not evidence)."""
    return value if isinstance(value, str) and value else None


def from_record(url: str, wheel: str, record: object) -> EvidenceRead:
    if not isinstance(record, dict) or not isinstance(record.get("bugs"), list):
        return EvidenceRead(url, wheel, problem="not the evidence publish writes")
    built, vllm = record.get("wheel"), record.get("vllm")
    if not isinstance(built, dict) or not isinstance(vllm, dict):
        return EvidenceRead(url, wheel, problem="not the evidence publish writes (no `wheel` or `vllm` object)")
    named = built.get("name")
    if named != wheel:
        return EvidenceRead(url, wheel, problem=f"the evidence of {named!r}, not of {wheel}")
    bugs = []
    for item in record["bugs"]:
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("bug", "verdict")):
            return EvidenceRead(url, wheel, problem="not the evidence publish writes (a bug without its verdict)")
        bugs.append(EvidenceBug(item["bug"], item["verdict"], text(item.get("test")) or ""))
    return EvidenceRead(
        url,
        wheel,
        found=True,
        wheel_sha256=text(built.get("sha256")),
        vllm_tag=text(vllm.get("tag")),
        line=text(record.get("line")),
        bugs=tuple(bugs),
    )


def proof_problem(read: EvidenceRead, needs: tuple[str, ...]) -> str | None:
    """Why the evidence does not prove the fix of every bug the release has (`needs`), or None."""
    verdicts = {b.bug: b.verdict for b in read.bugs}
    for bug in needs:
        if verdicts.get(bug) != FIXED:
            said = f"is {verdicts[bug]!r}" if bug in verdicts else "is not in it"
            return f"the release has {bug}, whose fix the evidence must prove `fixed`; it {said}"
    for bug, verdict in verdicts.items():
        if verdict not in (FIXED, NOT_AFFECTED):
            return f"{bug} is {verdict!r} in it: publish accepts only `fixed` or `not affected`"
    return None
