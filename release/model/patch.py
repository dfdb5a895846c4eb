"""One patch of the queue: a `git format-patch` mail with DEP-3 style trailers."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from email import policy
from email.parser import HeaderParser
from functools import cached_property
from pathlib import Path

from release.core.errors import MalformedPatchError
from release.core.files import read_text
from release.core.layout import UPSTREAM_SUBTREE
from release.core.text import control_character, described
from release.core.versions import canonical_tag

UPSTREAM_SUBTREE_PREFIX = UPSTREAM_SUBTREE + "/"

# ------------------------------------------------------------------------- patch

DIFF_FILE_RE = re.compile(r"^diff --git a/(?P<a>\S+) b/(?P<b>\S+)$", re.M)
HUNK_COUNTS_RE = re.compile(r"^@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@", re.ASCII)
# Header lines that carry a file mode: a link (120000) or submodule (160000) is refused.
MODE_LINE_RE = re.compile(
    r"^(?:new file mode|deleted file mode|new mode|old mode|index [0-9a-f]+\.\.[0-9a-f]+) (?P<mode>\d{6})$"
)
# The lines of a `diff --git` header that name a path (git's apply.c, parse_git_diff_header).
HEADER_PATH_LINES = ("rename from ", "rename to ", "rename old ", "rename new ", "copy from ", "copy to ")
# A patch's file name, the one rule for every file that names a patch (a series entry, `Varies:`, train.toml's
# `patches`, pq's `Patch-Name:`): four digits, '-', a slug of lowercase letters, digits, '.', '_' and '-'
# (from a letter or digit), `.patch`; ASCII, so never a path. What `pq` writes (release/pq/names.py).
PATCH_NAME_RE = re.compile(r"^(?P<number>\d{4})-(?P<slug>[a-z0-9][a-z0-9._-]*)\.patch$", re.ASCII)
# A line's variant names the common patch it stands in for: a file name in patches/, as the series has it.
VARIES = "Varies"
# A variant `pq carry` made records the common patch it was made from: its fingerprint (queue/gates.py).
CARRIED_FROM = "Carried-From"
# The first vLLM tag that has a patch's change (DEP-3: `vX.Y.Z[, URL]`); from it on the patch is retired.
APPLIED_UPSTREAM = "Applied-Upstream"
TRAILER_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9-]*): (?P<value>.*)$")

# ---------------------------------------------------------------- the message

# The four questions every patch answers in its message (after vllm-ascend's patch notes), each
# a paragraph that starts with its label; a paragraph without a label belongs to the one above.
SECTIONS = ("Why", "How", "Related PR", "Future plan")
SECTION_RE = re.compile(r"^(?P<label>Why|How|Related PR|Future plan):[ \t]*", re.I)
# The DEP-3 trailers a patch must carry, and the two ways of saying what it is for: the user-visible
# bug it fixes (`Bug: <id or URL> <title>`) or, for a change with no bug behind it, `Downstream: <why>`.
REQUIRED_TRAILERS = ("Origin", "Depends-On", "Risk")
# The regression test that goes upstream with the patch: its path under vLLM's `tests/`;
# its content is ours, under patches/upstream-tests/ at that path (docs/maintainers.md, "Send a patch upstream",
# also on patches/upstream-tests/tests.toml, which names the tests of patches already released).
UPSTREAM_TEST_TRAILER = "Upstream-Test"
PURPOSE_TRAILERS = ("Bug", "Downstream")
# An upstream backport taken with `git am` keeps upstream's own message (DEP-3's Description: is the
# subject and body): `Origin: upstream, URL` (or `backport, URL`) and `Applied-Upstream: <first vLLM tag
# that has it>[, URL]` say where it comes from and when it can go, so Why / How / Related PR / Future plan,
# Depends-On and Risk are not asked of it. What it fixes (Bug: or Downstream:) still is.
BACKPORT_ORIGINS = ("upstream", "backport")
BACKPORT_TRAILERS = ("Origin", APPLIED_UPSTREAM)
# A value still as the template wrote it: `<...>` (`Bug: <id or URL> <title>` included).
PLACEHOLDER_RE = re.compile(r"^<.*>$", re.S)
TEMPLATE_HINT = (
    "start the message from the template, `python -m release pq new SLUG`, and answer each of its questions "
    '(docs/patch-queue.md, "Add a patch")'
)


@dataclass(frozen=True)
class Purpose:
    """What a patch is for: a user-visible bug (an id or URL, and its title), or a downstream change."""

    bug: str  # the id or URL of the bug; "" for a downstream change
    title: str  # the bug's title, or why a downstream change has no bug

    @property
    def downstream(self) -> bool:
        return not self.bug


def is_patch_name(name: str) -> bool:
    """Is `name` a patch's file name (PATCH_NAME_RE)? The one rule; `\n` before the end is no match."""
    return PATCH_NAME_RE.fullmatch(name) is not None


def refuse_carriage_returns(name: str, text: str) -> None:
    """A patch holds no carriage return (CR, as in CRLF line ends): refused, never rewritten.

    Refused rather than kept because keeping is not possible and a rewrite is not ours to make:
    the mails we write and take are `git format-patch` output, LF throughout; every vendored
    upstream file is LF, so a CR in a hunk comes from an editor or a CRLF checkout and either
    changes the line ends of the file it patches or does not apply; and `git am` plus
    `format-patch` would re-export such a mail with LF headers, not its own bytes. The maintainer
    converts it on purpose (`dos2unix`) or re-exports it (docs/patch-queue.md, "Add a patch").
    """
    at = text.find("\r")
    if at < 0:
        return
    line = text.count("\n", 0, at) + 1
    ending = "ends in CRLF" if text.startswith("\r\n", at) else "holds a carriage return (CR)"
    raise MalformedPatchError(
        f"{name}: line {line} {ending}; a patch is LF-only and is never rewritten silently",
        hint="convert it on purpose (`dos2unix FILE`) or re-export it with `git format-patch` "
        '(docs/patch-queue.md, "Add a patch")',
    )


def _opens_traditional(lines: list[str], at: int) -> bool:
    """Does `lines[at - 1]` (a `--- ` line) open a traditional section, as git's find_header reads it?"""
    return at + 1 < len(lines) and lines[at].startswith("+++ ") and lines[at + 1].startswith("@@ -")


def _refuse_outside(name: str, path: str, prefixes: tuple[str, ...]) -> None:
    """`path`, a path a patch names, is inside `prefixes`: no `..`, `.` or empty component, no `.git`."""
    parts = path.split("/")
    inside = any(path == p or (p.endswith("/") and path.startswith(p)) for p in prefixes)
    if not inside or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts):
        raise MalformedPatchError(
            f"{name}: touches {path}, outside {', '.join(prefixes)}",
            hint="patches use upstream paths inside their release line's modules only (patches/lines.toml), no `..`",
        )


@dataclass(frozen=True)
class Hunk:
    path: str
    header: str
    lines: tuple[str, ...]  # each starts with ' ', '-' or '+'

    @property
    def removed(self) -> list[str]:
        return [line[1:] for line in self.lines if line.startswith("-")]

    @property
    def added(self) -> list[str]:
        return [line[1:] for line in self.lines if line.startswith("+")]


@dataclass(frozen=True)
class Patch:
    """One `git format-patch` mail in patches/, with DEP-3 style trailers in its message."""

    name: str
    text: str

    @classmethod
    def load(cls, path: Path, prefixes: tuple[str, ...] = (UPSTREAM_SUBTREE_PREFIX,)) -> Patch:
        """Read and validate one patch; `prefixes` are the upstream paths it may touch (its line's modules).

        The bytes are decoded as they are: `read_text` would turn CRLF into LF without a word,
        and the rewritten patch would then be written back by `rebase`.
        """
        patch = cls(path.name, read_text(path, error=MalformedPatchError))
        patch.validate(prefixes)
        return patch

    def validate(self, prefixes: tuple[str, ...] = (UPSTREAM_SUBTREE_PREFIX,)) -> None:
        """A queue's patch: a well-formed mail inside `prefixes` whose message follows the template."""
        self.validate_mail(prefixes)
        self.validate_message()

    def validate_message(self) -> None:
        """The four sections and the trailers the template asks for, each answered (docs/patch-queue.md).

        Every problem is named in one line, so a maintainer fixes the message once.
        """
        problems: list[str] = []
        sections = self.sections
        subject = self.subject
        if PLACEHOLDER_RE.match(subject):
            problems.append("the subject is the template's placeholder")
        backport = self.is_backport
        for label in () if backport else SECTIONS:
            value = sections.get(label)
            if not value:
                problems.append(f"no {label}:")
            elif any(PLACEHOLDER_RE.match(part) for part in value.split("\n\n")):
                problems.append(f"{label}: is the template's placeholder")
        trailers = self.trailers
        for key in BACKPORT_TRAILERS if backport else REQUIRED_TRAILERS:
            value = trailers.get(key, "").strip()
            if not value:
                problems.append(f"no {key}: trailer")
            elif PLACEHOLDER_RE.match(value):
                problems.append(f"{key}: is the template's placeholder")
        given = [key for key in PURPOSE_TRAILERS if trailers.get(key, "").strip()]
        if not given:
            problems.append("neither Bug: (an id or URL and a title) nor Downstream: (why there is no bug)")
        elif len(given) == 2:
            problems.append("both Bug: and Downstream: (a patch fixes a bug or is a downstream change, not both)")
        elif any(PLACEHOLDER_RE.match(trailers[key].strip()) for key in given):
            problems.append(f"{given[0]}: is the template's placeholder")
        elif given == ["Bug"] and not self.purpose.title:
            problems.append("Bug: has no title after its id or URL")
        elif given == ["Bug"] and PLACEHOLDER_RE.match(self.purpose.title):
            problems.append("Bug: keeps the template's placeholder title")
        if problems:
            listing = "; ".join(problems)
            raise MalformedPatchError(f"{self.name}: message not in the template's shape: {listing}", TEMPLATE_HINT)

    @property
    def is_backport(self) -> bool:
        """An upstream backport in DEP-3's shape: `Origin: upstream, URL` (or backport) and `Applied-Upstream:`."""
        trailers = self.trailers
        origin = trailers.get("Origin", "").strip().split(",", 1)[0].strip().lower()
        applied = trailers.get(APPLIED_UPSTREAM, "").strip()
        return origin in BACKPORT_ORIGINS and bool(applied) and not PLACEHOLDER_RE.match(applied)

    def validate_mail(self, prefixes: tuple[str, ...] = (UPSTREAM_SUBTREE_PREFIX,)) -> None:
        """A `git format-patch` mail, LF only, whose hunks parse and whose paths stay inside `prefixes`."""
        refuse_carriage_returns(self.name, self.text)
        if not self.text.startswith("From "):
            raise MalformedPatchError(f"{self.name}: not a `git format-patch` mail (no 'From ' line)")
        if not self.subject:
            raise MalformedPatchError(f"{self.name}: no Subject: header")
        self._refuse_control_characters()
        if not DIFF_FILE_RE.search(self.text):
            raise MalformedPatchError(f"{self.name}: holds no `diff --git` section")
        hunks = self.hunks
        if not hunks:
            raise MalformedPatchError(f"{self.name}: holds no hunk")
        self._validate_paths(prefixes)
        self._validate_varies()

    def _refuse_control_characters(self) -> None:
        """The subject and the trailers hold no control character (release/core/text.py): `status`, `pq`
        and `upstream-pr` print them, and PR.md quotes them; an ESC there would recolour a terminal."""
        for what, value in (
            ("its subject", self.subject),
            *((f"its {k}: trailer", v) for k, v in self.trailers.items()),
        ):
            found = control_character(value, allow="\t")
            if found is not None:
                raise MalformedPatchError(
                    f"{self.name}: {what} holds the control character {described(found)}",
                    hint="write the message in plain text; a patch's words are printed and sent upstream as they are",
                )

    def _validate_varies(self) -> None:
        """A variant's `Varies:` names a common patch: a file name in patches/, never a path.

        `build`, `check` and `pq carry` read patches/NAME for it: `Varies: ../../../tmp/x/leak.patch`
        would read a file outside the checkout."""
        common = self.varies
        if common is not None and not is_patch_name(common):
            raise MalformedPatchError(
                f"{self.name}: Varies: {common!r} is not a patch file name in patches/ (NNNN-slug.patch)",
                hint="a variant's `Varies:` names the common patch it stands in for, as patches/series does",
            )

    def _validate_paths(self, prefixes: tuple[str, ...]) -> None:
        """Every path git would read from the mail stays inside the subtree, and every file stays a file.

        `git apply` reads the whole mail, message included, as git's apply.c (find_header) does: a
        `diff --git` line opens a file header (`---`/`+++`, `rename`/`copy` lines carry its paths), and
        a `--- ` line followed by `+++ ` and `@@ -` opens a traditional section wherever it stands:
        in the message, or after the last hunk. Our mails are `git format-patch` output, which writes
        `diff --git` sections only, so a traditional section is refused whatever it names: nothing
        else in the tool reads it, and git would apply it. Links (mode 120000) and submodules are
        refused; so are `..`, `.git` and empty components. Parsed here rather than by asking git
        (`git apply --numstat`) because a patch is validated in-process, unit tests included, and not
        by `unidiff`, which parses a diff rather than a mail and by its own header rules (a `---`/`+++`
        pair without the `@@ -` line git requires, say): the question is what git's find_header finds.
        """
        lines = self.text.split("\n")
        in_header = False
        for number, line in enumerate(lines, 1):
            paths: list[str] = []
            if line.startswith("diff --git "):
                match = DIFF_FILE_RE.match(line)
                if not match:  # a quoted or unusual name that our parser would not see
                    raise MalformedPatchError(f"{self.name}: cannot read the paths of {line!r}")
                paths, in_header = [match.group("a"), match.group("b")], True
            elif line.startswith("@@"):
                in_header = False
            elif not in_header:
                if line.startswith("--- ") and _opens_traditional(lines, number):
                    raise MalformedPatchError(
                        f"{self.name}: line {number} opens a file section without `diff --git` "
                        f"({line!r}, then {lines[number]!r}); git would apply it, so it is refused",
                        hint="a patch is `git format-patch` output: every file it changes has its own "
                        '`diff --git` section (docs/guarantees.md, "Untrusted sources")',
                    )
                continue
            elif line.startswith(("--- ", "+++ ")):
                name = line[4:].split("\t", 1)[0]
                if name != "/dev/null":
                    if not name.startswith(("a/", "b/")):
                        raise MalformedPatchError(f"{self.name}: cannot read the path of {line!r}")
                    paths = [name[2:]]
            elif line.startswith(HEADER_PATH_LINES):
                paths = [line.split(" ", 2)[2]]
            elif (mode := MODE_LINE_RE.match(line)) and mode.group("mode") not in ("100644", "100755"):
                raise MalformedPatchError(f"{self.name}: {line!r}: a patch may only hold regular files, no links")
            for path in paths:
                _refuse_outside(self.name, path, prefixes)

    @property
    def header(self) -> str:
        return self.text.split("\n\n", 1)[0]

    def _header_value(self, name: str) -> str:
        """One header of the mail as `git am` takes it, read by the standard library's RFC 5322 parser.

        As gbp reads a patch's headers with `email` (and git with mailinfo): folded lines are joined
        and RFC 2047 encoded words, which `format-patch` writes for a non-ASCII subject or author,
        are decoded. The leading `From <sha> <date>` line is the mbox separator, not a header.
        """
        headers = HeaderParser(policy=policy.default).parsestr(self.header)
        return str(headers.get(name, "")).strip()

    @property
    def subject(self) -> str:
        return self._header_value("Subject")

    @property
    def author(self) -> str:
        return self._header_value("From")

    @property
    def message(self) -> str:
        """The commit message body (after the headers, before the diff)."""
        body = self.text.split("\n\n", 1)[1] if "\n\n" in self.text else ""
        cut = re.search(r"^(---\n|diff --git )", body, re.M)
        return body[: cut.start()].rstrip("\n") if cut else body.rstrip("\n")

    @cached_property
    def _trailers(self) -> dict[str, str]:
        """The trailer block, parsed once per mail (the mail is frozen; `with_trailer` makes a new one)."""
        paragraphs = self.message.split("\n\n")
        found: dict[str, str] = {}
        for line in paragraphs[-1].split("\n") if paragraphs else []:
            match = TRAILER_RE.match(line)
            if match:
                found[match.group("key")] = match.group("value")
        return found

    @property
    def trailers(self) -> dict[str, str]:
        """The message's trailers, key -> value (a copy: the parsed block is the mail's own)."""
        return dict(self._trailers)

    @property
    def varies(self) -> str | None:
        """The common patch a line's variant stands in for (the first word of its `Varies:`), or None."""
        value = self._trailers.get(VARIES, "").strip()
        return value.split()[0] if value else None

    @property
    def carried_from(self) -> str:
        """The fingerprint of the common patch `pq carry` made this variant from (`Carried-From:`), or ""."""
        return self._trailers.get(CARRIED_FROM, "").strip()

    @property
    def applied_upstream(self) -> str | None:
        """The first vLLM tag that has the patch's change (its `Applied-Upstream:` trailer), or None.

        DEP-3 allows `vX.Y.Z, URL`: the first word is the tag; one that is not a release tag is bad input."""
        value = self._trailers.get(APPLIED_UPSTREAM, "").strip()
        return canonical_tag(value.split()[0].rstrip(",")) if value else None

    @property
    def sections(self) -> dict[str, str]:
        """The message's answers to SECTIONS, keyed by their label as SECTIONS spells it."""
        found: dict[str, list[str]] = {}
        current: list[str] | None = None
        for paragraph in self.message.split("\n\n")[:-1]:  # the last paragraph holds the trailers
            match = SECTION_RE.match(paragraph)
            if match:
                label = next(s for s in SECTIONS if s.lower() == match.group("label").lower())
                current = found.setdefault(label, [])
                paragraph = paragraph[match.end() :]
            if current is not None:
                current.append(paragraph.strip())
        return {label: "\n\n".join(p for p in parts if p) for label, parts in found.items()}

    @property
    def purpose(self) -> Purpose:
        """What the patch is for, from its `Bug:` (id or URL, then the title) or `Downstream:` trailer."""
        trailers = self.trailers
        bug = trailers.get("Bug", "").strip()
        if bug:
            ident, _, title = bug.partition(" ")
            return Purpose(ident, title.strip())
        return Purpose("", trailers.get("Downstream", "").strip())

    @property
    def depends_on(self) -> str:
        """What the change relies on outside vLLM's code (its `Depends-On:` trailer), or ""."""
        return self.trailers.get("Depends-On", "").strip()

    @property
    def upstream_test(self) -> str:
        """The path in vLLM's checkout of the regression test sent upstream with the patch, or ""."""
        return self._trailers.get(UPSTREAM_TEST_TRAILER, "").strip()

    @property
    def diff(self) -> str:
        match = re.search(r"^diff --git ", self.text, re.M)
        return self.text[match.start() :] if match else ""

    @property
    def files(self) -> list[str]:
        return [m.group("b") for m in DIFF_FILE_RE.finditer(self.text)]

    @property
    def hunks(self) -> list[Hunk]:
        """Hunks read by their header's line counts, so a short or long body is caught."""
        hunks: list[Hunk] = []
        for section in re.split(r"(?=^diff --git )", self.diff, flags=re.M):
            file_match = DIFF_FILE_RE.match(section)
            if not file_match:
                continue
            lines = section.split("\n")
            index = 0
            while index < len(lines):
                header = HUNK_COUNTS_RE.match(lines[index])
                index += 1
                if not header:
                    continue
                old_left = int(header.group("old") or 1)
                new_left = int(header.group("new") or 1)
                body: list[str] = []
                while (old_left > 0 or new_left > 0) and index < len(lines):
                    line = lines[index]
                    kind = line[:1]
                    if kind == "\\":  # "\ No newline at end of file" belongs to the line before
                        index += 1
                        continue
                    if kind not in (" ", "-", "+"):
                        break
                    old_left -= kind in (" ", "-")
                    new_left -= kind in (" ", "+")
                    body.append(line)
                    index += 1
                if old_left or new_left:
                    raise MalformedPatchError(
                        f"{self.name}: hunk {lines[index - len(body) - 1]!r} in {file_match.group('b')} is corrupt "
                        f"(its body ends {max(old_left, new_left)} line(s) short of what its header says)"
                    )
                hunks.append(Hunk(file_match.group("b"), lines[index - len(body) - 1], tuple(body)))
        return hunks

    @property
    def change_digest(self) -> str:
        """sha256 hex of what the patch says and changes: its message and, per file, the lines it removes and
        adds, in order; not its hunk positions, context or `index` lines.

        `rebase` refreshes a patch whose context moved upstream, which rewrites exactly those: the change is
        the same, so neither a variant carried from it (`Carried-From:`) nor what a train tag carries (its
        patch level) changes with a refresh. An edit of the message (a retiring `Applied-Upstream:` too) or
        of any removed or added line does."""
        changed = (
            f"{hunk.path}\n" + "\n".join(line for line in hunk.lines if line.startswith(("-", "+")))
            for hunk in self.hunks
        )
        return hashlib.sha256("\0".join((self.message, *changed)).encode("utf-8")).hexdigest()

    def with_trailer(self, key: str, value: str) -> Patch:
        """The same mail with `key: value` set in the trailer block (added or replaced)."""
        message = self.message
        paragraphs = message.split("\n\n")
        trailer_lines = paragraphs[-1].split("\n")
        line = f"{key}: {value}"
        replaced = [line if TRAILER_RE.match(t) and t.split(":", 1)[0] == key else t for t in trailer_lines]
        if replaced == trailer_lines:
            replaced.append(line)
        new_message = "\n\n".join([*paragraphs[:-1], "\n".join(replaced)])
        return replace(self, text=self.text.replace(message, new_message, 1))

    def without_trailer(self, key: str) -> Patch:
        """The same mail without its `key:` trailer line(s): what `with_trailer` added, taken away again."""
        message = self.message
        paragraphs = message.split("\n\n")
        kept = [t for t in paragraphs[-1].split("\n") if not (TRAILER_RE.match(t) and t.split(":", 1)[0] == key)]
        new_message = "\n\n".join([*paragraphs[:-1], "\n".join(kept)])
        return replace(self, text=self.text.replace(message, new_message, 1))

    @property
    def slug(self) -> str:
        return re.sub(r"^\d{4}-", "", self.name.removesuffix(".patch"))
