"""The rebase report, written twice: Markdown for a person, JSON for a machine."""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from release.model.outcome import PatchOutcome


@dataclass
class FileChange:
    file: str
    change: str  # added | removed | modified
    added_lines: int
    removed_lines: int


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
    work_dir: str = ""
    continue_command: str = ""
    abort_command: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=False) + "\n"

    def to_markdown(self) -> str:
        lines = [
            f"# Rebase onto vLLM {self.new_tag}: {self.result}{' (dry run, nothing written)' if self.dry_run else ''}",
            "",
            f"- from: {self.old_tag} → {self.new_tag}",
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
        lines += ["", f"## Upstream changes in the subtree since {self.old_tag}", ""]
        if self.upstream_changes:
            lines += ["| file | change | + | - |", "| --- | --- | --- | --- |"]
            lines += [
                f"| `{c.file}` | {c.change} | {c.added_lines} | {c.removed_lines} |" for c in self.upstream_changes
            ]
        else:
            lines.append("none")
        return "\n".join(lines) + "\n"

    def write(self, directory: Path) -> tuple[Path, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        md, js = directory / "rebase-report.md", directory / "rebase-report.json"
        md.write_text(self.to_markdown(), encoding="utf-8")
        js.write_text(self.to_json(), encoding="utf-8")
        return md, js


def _pin_within(pin: str, verified: str) -> bool:
    """Is vLLM's exact FlashInfer pin one of the verified versions ("0.6.6, 0.6.8.post1")?"""
    try:
        requirement = Requirement(pin)
        pinned = [s.version for s in requirement.specifier if s.operator in ("==", "===")]
        versions = [Version(v.strip()) for v in verified.split(",") if v.strip()]
        return bool(pinned) and all(Version(v) in versions for v in pinned)
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
