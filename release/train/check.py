"""`train check`: every tag of the train reproduces what patches/train.toml records, byte for byte.

Per tag: read its pristine subtree from the recorded source (offline when the release
wheel is cached), compare the source's identity (wheel sha256, commit) and every pristine
file's sha256, replay the series that tag takes (its line's; a retired patch where the tag is
older than its Applied-Upstream) in a scratch directory and compare every patched file's sha256
and the patches applied. For the head (the tag of UPSTREAM.toml) the entry must also agree
with UPSTREAM.toml and with vendor/ itself. Every finding names the tag and the file. A release
line whose series is silent about a common patch is refused first (exit 2).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from release.core.errors import ReleaseError, TransportError, UnknownTrainTagError
from release.core.hashing import sha256_hex
from release.core.layout import Layout
from release.core.versions import canonical_tag
from release.model.lines import Line
from release.model.outcome import PatchStatus
from release.model.patch import Patch
from release.model.train import Train, TrainEntry
from release.pristine.sources import fetch
from release.queue.load import Queue, is_head, require_accounted
from release.queue.snapshot import Checkout
from release.train.replay import TagReplay, line_made_on, replay_tag

VENDOR_SUBTREE = "vendor/vllm_fused_moe/prepare_finalize"


@dataclass(frozen=True)
class Finding:
    tag: str
    file: str  # the file it is about: a subtree path, patches/NAME, vendor/..., or the source
    kind: str  # source | pristine | patched | replay | head
    detail: str

    def line(self) -> str:
        return f"{self.tag}  {self.kind:<8} {self.file}: {self.detail}"


@dataclass
class TagCheck:
    tag: str
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    replay: TagReplay | None = None  # the reproduced tree, when it could be made

    @property
    def ok(self) -> bool:
        return not self.findings


def select(train: Train, tags: list[str] | None) -> list[TrainEntry]:
    if not tags:
        return list(train.entries)
    chosen = []
    for tag in tags:
        entry = train.get(canonical_tag(tag))
        if entry is None:
            raise UnknownTrainTagError(f"{tag} is not in the train ({', '.join(train.tags) or 'empty'})")
        chosen.append(entry)
    return chosen


def check_train(checkout: Checkout, tags: list[str] | None = None, jobs: int | None = None) -> list[TagCheck]:
    """Check the chosen tags (all by default), several at a time; results in train order. `checkout`: the
    checkout as the command read it under its lock."""
    layout = checkout.layout
    train = checkout.require_train()
    queue = checkout.queue
    require_accounted(checkout)
    entries = select(train, tags)
    # The head's pristine tree, recovered from vendor/ by undoing the series (offline): only the source of the
    # patches' pre-image blobs; every result is checked against recorded hashes.
    base = checkout.drift()[1]
    lines = checkout.lines
    # Each tag's series, read once: its line's, with the retired patches it is older than.
    series = {e.tag: checkout.tag_patches(lines.get(e.line), e.tag) for e in entries}
    # What each line's series was made on (the head's pristine tree; an older line's newest train tag),
    # read once per line: a later patch on a file an earlier one changed merges 3-way from its blobs.
    made_on = {e.line: base for e in entries}
    for name in made_on:
        line = lines.get(name)
        if not is_head(layout, line):
            made_on[name] = line_made_on(train, line, "")
    workers = jobs or min(4, os.cpu_count() or 1, max(len(entries), 1))
    with ThreadPoolExecutor(workers) as pool:
        results = list(
            pool.map(
                lambda e: check_entry(layout, queue, e, made_on[e.line], lines.get(e.line), series[e.tag]), entries
            )
        )
    if not tags and queue.pin.tag not in train.tags:
        results.insert(
            0,
            TagCheck(
                queue.pin.tag,
                [Finding(queue.pin.tag, "patches/train.toml", "head", "the head (UPSTREAM.toml) has no train entry")],
            ),
        )
    return results


def check_entry(
    layout: Layout,
    queue: Queue,
    entry: TrainEntry,
    base: dict[str, bytes],
    line: Line | None = None,
    patches: list[Patch] | None = None,
) -> TagCheck:
    """One tag: its line's modules from the recorded source, replayed with the series it takes.

    `base`: the tree the line's series was made on (the head's pristine tree; for an older line its
    newest train tag's modules), whose blobs the replay's 3-way merges find their bases in."""
    started = time.perf_counter()
    result = TagCheck(entry.tag)
    head_line = line is None or is_head(layout, line)
    patches = queue.patches if patches is None else patches
    try:
        # Lazy: only compared, file by file, with the sha256s recorded from verified bytes at `train add`.
        upstream = fetch(entry.tag, entry.recorded_source(), None if head_line else line, lazy=True)
    except TransportError:
        raise  # the network broke, not the tag: exit 4 as from every command, not a finding
    except ReleaseError as exc:
        result.findings.append(Finding(entry.tag, entry.source, "source", f"cannot read it: {exc}"))
        result.seconds = time.perf_counter() - started
        return result
    tag = entry.tag
    for what, recorded, found in (
        ("wheel", entry.wheel, upstream.wheel),
        ("wheel sha256", entry.wheel_sha256, upstream.wheel_sha256),
        ("commit", entry.commit, upstream.commit),
    ):
        # A source that does not report a field (a lazy reader, a git tree) leaves it unchecked.
        if recorded and found and recorded != found:
            result.findings.append(
                Finding(tag, entry.wheel or entry.source, "source", f"{what} recorded {recorded}, source has {found}")
            )
    result.findings += compare(tag, "pristine", entry.pristine, upstream.file_hashes(), patches)
    if head_line:
        replay = replay_tag(upstream, base, patches)
    else:
        assert line is not None
        replay = replay_tag(upstream, base, patches, line.root)
    refusal = replay.refusal(head=tag == queue.pin.tag)
    if refusal:
        bad = [o for o in replay.outcomes if o.status in (PatchStatus.CONFLICT, PatchStatus.UPSTREAM)]
        where = f"patches/{bad[0].name}" if bad else (line.series if line else "patches/series")
        result.findings.append(Finding(tag, where, "replay", refusal))
    else:
        result.replay = replay
        result.findings += compare(tag, "patched", entry.patched, replay.patched_hashes(), patches)
        if replay.applied != entry.patches:
            recorded = ", ".join(entry.patches) or "none"
            result.findings.append(
                Finding(
                    tag,
                    "patches/train.toml",
                    "replay",
                    f"applies {', '.join(replay.applied) or 'no patch'}; the train records {recorded}",
                )
            )
    if tag == queue.pin.tag:
        result.findings += check_head(layout, queue, entry)
    result.seconds = time.perf_counter() - started
    return result


def check_head(layout: Layout, queue: Queue, entry: TrainEntry) -> list[Finding]:
    """The head's entry says the same as UPSTREAM.toml, and vendor/ holds exactly its patched files."""
    findings = []
    if entry.pristine != queue.pin.files:
        differs = sorted(
            n for n in set(entry.pristine) | set(queue.pin.files) if entry.pristine.get(n) != queue.pin.files.get(n)
        )
        findings += [
            Finding(entry.tag, name, "head", "pristine sha256 differs from vendor/vllm_fused_moe/UPSTREAM.toml")
            for name in differs
        ]
    vendor = {name: sha256_hex(data) for name, data in layout.vendor_files().items()}
    for finding in compare(entry.tag, "patched", entry.patched, vendor, queue.patches):
        findings.append(
            Finding(
                entry.tag, f"{VENDOR_SUBTREE}/{finding.file}", "head", finding.detail.replace("this tag's", "vendor/'s")
            )
        )
    return findings


def compare(
    tag: str, kind: str, recorded: dict[str, str], found: dict[str, str], patches: list[Patch]
) -> list[Finding]:
    """Every file whose sha256 differs, is missing or is new, named with the patches that touch it."""
    findings = []
    for name in sorted(set(recorded) | set(found)):
        want, got = recorded.get(name), found.get(name)
        if want == got:
            continue
        touched = [p.name for p in patches if any(f.endswith("/" + name) for f in p.files)]
        by = f" (patched by {', '.join(touched)})" if touched and kind == "patched" else ""
        if got is None:
            detail = f"recorded, but this tag's {kind} tree has no such file"
        elif want is None:
            detail = f"this tag's {kind} tree has it, the train does not record it"
        else:
            detail = f"{kind} sha256 recorded {want[:16]}…, this tag's {kind} tree gives {got[:16]}…{by}"
        findings.append(Finding(tag, name, kind, detail))
    return findings
