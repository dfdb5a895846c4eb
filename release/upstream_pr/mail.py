"""The upstream form of one of our patches, and whether it applies to a pristine tree.

Our mails carry DEP-3 bookkeeping trailers (Origin, Risk, Last-Update, ...) that mean
nothing in vLLM's history; upstream gets the prose and the diff, and the bookkeeping goes
into PR.md where reviewers can read it. Standard git trailers (Signed-off-by,
Co-authored-by, ...) are kept. The diff is never touched, so the upstream mail applies
exactly where ours does.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import replace
from pathlib import Path

from release.core.git import WorkRepo
from release.model.patch import APPLIED_UPSTREAM, CARRIED_FROM, TRAILER_RE, UPSTREAM_TEST_TRAILER, VARIES, Patch

# DEP-3 fields and our own (docs/patch-queue.md, "Add a patch", names the ones we write).
INTERNAL_TRAILERS = frozenset(
    {
        "Origin",
        APPLIED_UPSTREAM,
        "Depends-On",
        "Risk",
        "Forwarded",
        "Last-Update",
        "Bug",
        "Downstream",
        VARIES,
        CARRIED_FROM,
        "Author",
        "Description",
        "Reviewed-By",
        "Applied-Upstream-In",
        UPSTREAM_TEST_TRAILER,
    }
)


def _is_trailer_block(paragraph: str) -> bool:
    lines = paragraph.splitlines()
    return bool(lines) and all(TRAILER_RE.match(line) or line.startswith((" ", "\t")) for line in lines)


def upstream_mail(patch: Patch) -> Patch:
    """The same mail with our internal trailers removed from its message."""
    message = patch.message
    paragraphs = message.split("\n\n")
    if len(paragraphs) < 2 or not _is_trailer_block(paragraphs[-1]):
        return patch
    kept: list[str] = []
    dropping = False
    for line in paragraphs[-1].splitlines():
        if line.startswith((" ", "\t")):  # a folded continuation belongs to the trailer above
            if not dropping:
                kept.append(line)
            continue
        dropping = line.split(":", 1)[0] in INTERNAL_TRAILERS
        if not dropping:
            kept.append(line)
    new_message = "\n\n".join(paragraphs[:-1] + (["\n".join(kept)] if kept else []))
    return replace(patch, text=patch.text.replace(message, new_message, 1))


def applies_to(files: dict[str, bytes], mail: Patch) -> tuple[bool, str]:
    """Whether `mail` applies to the subtree `files` as it is (no fuzz, no 3-way); git's reason if not."""
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-pr-") as tmp:
        repo = WorkRepo.create(Path(tmp) / "tree")
        repo.commit_subtree(files, "pristine")
        mail_file = Path(tmp) / mail.name
        mail_file.write_text(mail.text, encoding="utf-8")
        result = repo.apply_check(mail_file)
    return result.ok, result.err.strip()


def new_file_diff(path: str, text: str) -> str:
    """The `git format-patch --full-index` section that creates `path` holding `text` (LF, ends in a newline)."""
    data = text.encode("utf-8")
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    # split("\n"), as git does: splitlines() also ends a line at a form feed, U+2028 and other separators,
    # and the file the mail then creates would not be the blob its `index` line names.
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex {'0' * 40}..{blob}\n--- /dev/null\n"
        f"+++ b/{path}\n@@ -0,0 +1{f',{len(lines)}' if len(lines) != 1 else ''} @@\n"
        + "".join(f"+{line}\n" for line in lines)
    )


def with_test(mail: Patch, path: str, text: str) -> Patch:
    """The mail with the regression test `path` added to its diff, first, as git orders paths (tests/ < vllm/)."""
    diff = mail.diff
    return replace(mail, text=mail.text[: len(mail.text) - len(diff)] + new_file_diff(path, text) + diff)
