"""The rebase report, written twice: Markdown for a person, JSON for a machine."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.requirements import Requirement

from release.core.files import present
from release.core.journal import write_atomic
from release.core.versions import package_version
from release.model.outcome import PatchOutcome
from release.queue.load import named_patch, older
from release.queue.snapshot import Checkout

MARKDOWN, JSON = "rebase-report.md", "rebase-report.json"
RUNS = "runs"  # each run's report, numbered, never overwritten; the directory's own pair is the newest
_RUN_RE = re.compile(r"^\d{4,}$")


@dataclass
class FileChange:
    file: str
    change: str  # added | removed | modified
    added_lines: int
    removed_lines: int


@dataclass
class Retirement:
    """What a patch leaving (or coming back to) the head's series means for the train."""

    patch: str
    applied_upstream: str  # the first vLLM tag that has its change
    change: str  # "retired": upstream from applied_upstream; "returned": the new head is older than that
    keeps_replaying: list[str]  # train tags older than applied_upstream: they replay it (or their line's variant)
    no_longer: list[str]  # train tags at or after applied_upstream whose entry still records it: re-record them

    def sentence(self) -> str:
        keeps = ", ".join(self.keeps_replaying) or "no tag of the train"
        if self.change == "returned":
            return (
                f"{self.patch} is back in patches/series: the new head is older than {self.applied_upstream}, "
                f"its first release with the change; the train's {keeps} replay it as before"
            )
        text = (
            f"{self.patch} retired as upstream in {self.applied_upstream} (patches/series keeps it as `retired`); "
            f"every train tag older than {self.applied_upstream} still replays it: {keeps}"
        )
        if self.no_longer:
            text += (
                f"; {', '.join(self.no_longer)} recorded it and no longer replay it: re-record them "
                "(`python -m release train add TAG`)"
            )
        return text


def retirements(checkout: Checkout, tag: str, retired: list[str], returned: list[str]) -> list[Retirement]:
    """Per patch this rebase retired or brought back: which train tags replay it from here on (from the
    checkout as the rebase read it, before its swap)."""
    layout = checkout.layout
    if not present(layout.train) or not (retired or returned):
        return []
    train = checkout.require_train()
    lines = checkout.lines
    out = []
    for name in [*retired, *returned]:
        upstream = tag if name in retired else _applied_upstream(checkout, name) or tag
        carrying = []
        for entry in train.entries:
            line = lines.get(entry.line)
            found = [named_patch(layout, line, recorded, checkout.patch) for recorded in entry.patches]
            if any(p is not None and (p.name == name or p.varies == name) for p in found):
                carrying.append(entry.tag)
        out.append(
            Retirement(
                name,
                upstream,
                "retired" if name in retired else "returned",
                [e.tag for e in train.entries if older(e.tag, upstream)],
                [t for t in carrying if not older(t, upstream)],
            )
        )
    return out


def _applied_upstream(checkout: Checkout, name: str) -> str | None:
    path = checkout.layout.retired / name
    if not path.is_file():
        return None
    # A patch that returns to the series was read (and validated) as a retired one by rebase_patches.
    return checkout.patch(path).applied_upstream


@dataclass
class RebaseReport:
    old_tag: str
    new_tag: str
    source: str
    wheel: str
    wheel_sha256: str
    commit: str
    flashinfer_old: str
    flashinfer_new: str
    flashinfer_verified: str
    dry_run: bool
    result: str  # done | conflict | nothing-to-do
    patches: list[PatchOutcome]
    upstream_changes: list[FileChange]
    # forward | backward (the new tag is older than the old head: --allow-older) | same
    direction: str = "forward"
    work_dir: str = ""
    continue_command: str = ""
    abort_command: str = ""
    run: str = ""  # this run's own copy, relative to the report directory (runs/NNNN)
    earlier_runs: list[str] = field(default_factory=list)
    # What each patch retired (or brought back) here means for the train: who keeps replaying it.
    retirements: list[Retirement] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=False) + "\n"

    def to_markdown(self) -> str:
        lines = [
            f"# Rebase onto vLLM {self.new_tag}: {self.result}{' (dry run, nothing written)' if self.dry_run else ''}",
            "",
            f"- from: {self.old_tag} → {self.new_tag}" + self._direction_note(),
            f"- source: `{self.source}`"
            + (f", wheel `{self.wheel}` (sha256 `{self.wheel_sha256[:16]}…`)" if self.wheel else "")
            + (f", commit `{self.commit[:12]}`" if self.commit else ""),
            f"- FlashInfer pin of vLLM: `{self.flashinfer_old or '?'}` → `{self.flashinfer_new or '?'}`;"
            f" verified by our tests: `{self.flashinfer_verified}`"
            + (
                ""
                if _pin_within(self.flashinfer_new, self.flashinfer_verified)
                else " — **outside the verified range: this tag's wheel is not built until that version "
                "is verified (docs/contract.md)**"
            ),
            "",
            "## Patches",
            "",
            "| patch | status | how | refreshed |",
            "| --- | --- | --- | --- |",
        ]
        for p in self.patches:
            lines.append(f"| `{p.name}` | **{p.status}** | {p.how} | {'yes' if p.refreshed else 'no'} |")
        for p in self.patches:
            for c in p.conflicts:
                lines += [
                    "",
                    f"### Conflict in `{p.name}`: `{c.file}`",
                    "",
                    "Hunks of the patch: " + ", ".join(f"`{h}`" for h in c.hunks),
                    "",
                    "Upstream (ours, the new tag):",
                    "```python",
                    c.ours.rstrip("\n"),
                    "```",
                    "Patch (theirs):",
                    "```python",
                    c.theirs.rstrip("\n"),
                    "```",
                ]
        if self.retirements:
            lines += ["", "## What the retirement means for the train", ""]
            lines += [f"- {r.sentence()}." for r in self.retirements]
        if self.work_dir:
            lines += [
                "",
                "## To finish",
                "",
                f"The half-done state is in `{self.work_dir}`; vendor/ and patches/ are unchanged.",
                "",
                f"- resolve: edit the files named above in `{self.work_dir}/repo`, "
                f"`git -C {self.work_dir}/repo add <file>`, then",
                f"- continue: `{self.continue_command}`",
                f"- or abort: `{self.abort_command}`",
            ]
        if self.run:
            earlier = ", ".join(f"`{name}/`" for name in self.earlier_runs) or "none"
            lines += ["", f"This run's report is also `{self.run}/`; earlier runs here: {earlier}."]
        lines += ["", f"## Upstream changes in the subtree since {self.old_tag}", ""]
        if self.upstream_changes:
            lines += ["| file | change | + | - |", "| --- | --- | --- | --- |"]
            lines += [
                f"| `{c.file}` | {c.change} | {c.added_lines} | {c.removed_lines} |" for c in self.upstream_changes
            ]
        else:
            lines.append("none")
        return "\n".join(lines) + "\n"

    def _direction_note(self) -> str:
        if self.direction != "backward":
            return ""
        moved = "would move" if self.dry_run else "moves"
        return (
            f" — **backwards: {self.new_tag} is older than the head {self.old_tag}; this {moved} vendor/ and the "
            "head of the train back (`--allow-older`)**"
        )

    def write(self, directory: Path) -> tuple[Path, Path]:
        """This run's pair in `runs/NNNN/` (kept), then the same bytes as the directory's newest pair.

        A rerun (a second dry run, a rebase after its dry run, `--continue` after a conflict) so never
        replaces what an earlier run reported: "nothing-to-do" after "done" is a new file beside it.
        """
        directory.mkdir(parents=True, exist_ok=True)
        runs = directory / RUNS
        md, js = directory / MARKDOWN, directory / JSON
        if not runs.exists() and (md.is_file() or js.is_file()):
            # A report from before runs were numbered: it is the first run, not something to overwrite.
            (runs / "0001").mkdir(parents=True)
            for path in (md, js):
                if path.is_file():
                    path.replace(runs / "0001" / path.name)
        runs.mkdir(exist_ok=True)
        self.earlier_runs = sorted(
            (f"{RUNS}/{p.name}" for p in runs.iterdir() if p.is_dir() and _RUN_RE.match(p.name)),
            key=lambda name: int(name.rsplit("/", 1)[1]),
        )
        number = int(self.earlier_runs[-1].rsplit("/", 1)[1]) + 1 if self.earlier_runs else 1
        while True:  # mkdir is the claim: two writers into one --report directory never share a number
            own = runs / f"{number:04d}"
            try:
                own.mkdir()
                break
            except FileExistsError:
                number += 1
        self.run = f"{RUNS}/{own.name}"
        markdown, text = self.to_markdown().encode("utf-8"), self.to_json().encode("utf-8")
        write_atomic(own / MARKDOWN, markdown)
        write_atomic(own / JSON, text)
        write_atomic(md, markdown)
        write_atomic(js, text)
        return md, js


def _pin_within(pin: str, verified: str) -> bool:
    """Is vLLM's exact FlashInfer pin one of the verified versions ("0.6.6, 0.6.8.post1")?"""
    try:
        requirement = Requirement(pin)
        pinned = [s.version for s in requirement.specifier if s.operator in ("==", "===")]
        versions = [package_version(v.strip()) for v in verified.split(",") if v.strip()]
        return bool(pinned) and all(package_version(v) in versions for v in pinned)
    except Exception:
        return False


def upstream_changes(old: dict[str, bytes], new: dict[str, bytes]) -> list[FileChange]:
    changes = []
    for name in sorted(set(old) | set(new)):
        a = old.get(name, b"").decode("utf-8", "replace").splitlines()
        b = new.get(name, b"").decode("utf-8", "replace").splitlines()
        if name in old and name in new and a == b:
            continue
        diff = list(difflib.unified_diff(a, b, lineterm="", n=0))
        plus = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
        minus = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
        kind = "added" if name not in old else "removed" if name not in new else "modified"
        changes.append(FileChange(name, kind, plus, minus))
    return changes
