"""The train file's data: patches/train.toml, every vLLM release we ship an overlay for, parsed and written.

The `train` command that changes it is release/train/ (a stage); this module is the model it shares.

Each entry says where that tag's pristine code came from (wheel file and sha256, or git
commit), the sha256 of every pristine file, and of every file after the series. vendor/
holds one tag of the train (the head); every other tag is rebuilt from its pristine source
and the series and must reproduce these hashes byte for byte (`release train check`).
Parsed once, validated with clear errors, written back byte-stably.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import tomli_w

from release.core.errors import BadPatchLevelError, TrainFileError, UnknownTagError
from release.core.files import read_text
from release.core.parse import parse_toml
from release.core.text import CONTROL_RE as TEXT_CONTROL_RE
from release.core.versions import canonical_tag, parse_version, version_of_tag
from release.model.patch import Patch, is_patch_name
from release.model.pin import Pin
from release.model.source import Source
from release.model.tree import UpstreamTree

SHA256_RE = re.compile(r"[0-9a-f]{64}")
COMMIT_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256 object names
CONTROL_RE = TEXT_CONTROL_RE  # release/core/text.py owns the set
DEFAULT_LINE = "prepare_finalize"
TEXT_KEYS = ("tag", "line", "source", "wheel", "wheel_sha256", "commit", "flashinfer")
KEYS = (*TEXT_KEYS, "patches", "bugs", "level", "carried_digest", "shipped", "pristine", "patched")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
HEADER = (
    "# The release train: every vLLM release we ship an overlay for, oldest first.\n"
    "# Written by `python -m release train add|remove` and `rebase`; `train check` proves\n"
    "# that pristine(tag) + patches/series reproduces every hash below, byte for byte.\n"
    "# `bugs`: the bugs the tag has (it only grows); `level`: the N of its overlay's <vllm>+fm.N, and\n"
    "# `carried_digest`: the digest of the patches it carries at that level; a re-record that carries\n"
    "# other patches raises the level by one, so a tag's patch level only goes up.\n"
    "# `shipped`: the digest of the files its wheel at that level ships (written by `build`); a build whose\n"
    "# files differ raises the level by one and records it, so the level follows the bytes the wheel ships.\n"
    "# [[removed]]: what `train remove` keeps of a tag (its level, bugs and carried digest), so that adding\n"
    "# it again goes on from there.\n"
)
REMOVED_KEYS = ("tag", "patches", "bugs", "level", "carried_digest", "shipped")


@dataclass(frozen=True)
class TrainEntry:
    tag: str
    source: str  # how it was read: "pypi", "wheel:PATH", "git+URL", ...
    line: str = DEFAULT_LINE  # the release line: which upstream modules are vendored
    wheel: str = ""
    wheel_sha256: str = ""
    commit: str = ""
    flashinfer: str = ""  # the tag's own pin, e.g. "flashinfer-python==0.6.6"
    # The patches its replay applied, in order (a line's variants by their own names): what its overlay carries.
    patches: tuple[str, ...] = ()
    # The bugs the tag has (the `Bug:` ids of the patches its replays applied, and of the scan's findings):
    # a fact of the tag's code, so it only grows; the gates hold every build of the tag to it.
    bugs: tuple[str, ...] = ()
    # The N of its overlay's version <vllm>+fm.N (0: not recorded; the number of patches it carries then),
    # and the digest of what it carries (digest_carried) at that level: a re-record that carries something
    # else raises the level by one (`after`), so a tag's patch level only goes up.
    level: int = 0
    carried_digest: str = ""
    # The digest of the files its wheel at `level` ships (release.overlay.shipped: everything it installs but the
    # build information); "" until a build records it. A build whose files differ raises the level (`shipped_at`).
    shipped: str = ""
    pristine: dict[str, str] = field(default_factory=dict)  # path in the line's subtree -> sha256
    patched: dict[str, str] = field(default_factory=dict)  # the same after the series

    @property
    def version(self) -> str:
        return version_of_tag(self.tag)

    def recorded_source(self) -> Source:
        """The source the entry was recorded from, as `Source`; a `wheel:NAME` with the sha256 beside it."""
        return Source.parse(self.source).with_digest(self.wheel_sha256)

    @classmethod
    def of(
        cls,
        upstream: UpstreamTree,
        patched: dict[str, str],
        line: str = DEFAULT_LINE,
        source: str = "",
        patches: tuple[str, ...] = (),
    ) -> TrainEntry:
        """The entry for `upstream` (its provenance and pristine hashes) with the hashes after the series."""
        return cls(
            tag=upstream.tag,
            source=source or upstream.source,
            line=line,
            wheel=upstream.wheel,
            wheel_sha256=upstream.wheel_sha256,
            commit=upstream.commit,
            flashinfer=upstream.flashinfer,
            patches=patches,
            pristine=upstream.file_hashes(),
            patched=patched,
        )

    @property
    def patch_level(self) -> int:
        """The N of <vllm>+fm.N its next build gets: the recorded level, else the number of patches it carries."""
        return self.level or max(len(self.patches), 1)

    def after(self, old: TrainEntry | None) -> TrainEntry:
        """This entry as recorded in place of `old` (the tag's entry before, or None): the bugs of both, and
        old's level, one above it when what the tag carries changed (another `carried_digest`; for an entry
        that records none, other patch names); level 1 for a tag new to the train."""
        if old is None:
            return replace(self, level=self.level or 1)
        same = old.carried_digest == self.carried_digest if old.carried_digest else old.patches == self.patches
        level = old.patch_level if same else old.patch_level + 1
        # What the old level shipped stays its record while the level stays; a new level has shipped nothing yet.
        shipped = old.shipped if max(level, self.level) == old.patch_level else self.shipped
        bugs = tuple(sorted({*old.bugs, *self.bugs}))
        return replace(self, level=max(level, self.level), bugs=bugs, shipped=shipped)

    def shipped_at(self, digest: str, asked: int | None = None) -> TrainEntry:
        """This entry once a build made a wheel whose files have `digest` (`asked`: its --patch-level, if any).

        The level follows the bytes the wheel ships: the same digest (or none recorded yet) keeps it, another
        raises it by one; `asked` may set it higher, never lower. Either way the digest is recorded for that
        level, so the next build of the same files keeps it and a no-op writes nothing."""
        level = self.patch_level
        if asked is not None:
            self.refuse_level(asked, other_files=bool(self.shipped) and self.shipped != digest)
            level = asked
        elif self.shipped and self.shipped != digest:
            level += 1
        return replace(self, level=level, shipped=digest)

    def refuse_level(self, asked: int, other_files: bool = False) -> None:
        """Refuse a --patch-level below the recorded level, or at it for other files than it shipped."""
        level = self.patch_level
        if asked < level or (asked == level and other_files):
            raise BadPatchLevelError(
                f"--patch-level {asked} for {self.tag}: patches/train.toml records level {level}"
                + (" with other files" if asked == level else "")
                + "; a tag's patch level only goes up",
                hint=f"build without --patch-level (it raises the level when the files change), or with "
                f"--patch-level above {level}; nothing was built",
            )

    def pin(self, subtree: str) -> Pin:
        """This tag as the pin of a build: its provenance and pristine hashes, for `subtree`."""
        return Pin(
            tag=self.tag,
            source=self.source,
            subtree=subtree,
            flashinfer=self.flashinfer,
            wheel=self.wheel,
            wheel_sha256=self.wheel_sha256,
            commit=self.commit,
            files=self.pristine,
        )


@dataclass(frozen=True)
class Train:
    entries: tuple[TrainEntry, ...]
    # What `train remove` kept of each removed tag (REMOVED_KEYS): its level was published, so a tag added
    # again continues from it (`previous`), and its bugs stay known.
    removed: tuple[TrainEntry, ...] = ()

    @property
    def tags(self) -> list[str]:
        return [entry.tag for entry in self.entries]

    def get(self, tag: str) -> TrainEntry | None:
        return next((entry for entry in self.entries if entry.tag == tag), None)

    def previous(self, tag: str) -> TrainEntry | None:
        """What the train knows of `tag` before it is recorded again: its entry, or what removing it kept."""
        return self.get(tag) or next((e for e in self.removed if e.tag == tag), None)

    def with_entry(self, entry: TrainEntry) -> Train:
        """The train with `entry` added, or replacing the entry of the same tag; oldest first."""
        kept = [e for e in self.entries if e.tag != entry.tag]
        removed = tuple(e for e in self.removed if e.tag != entry.tag)
        return Train(tuple(sorted([*kept, entry], key=lambda e: _order(e.tag))), removed)

    def without(self, tag: str) -> Train:
        """The train without `tag`, keeping its level, bugs and carried digest under [[removed]]."""
        gone = [
            TrainEntry(
                e.tag,
                "",
                patches=e.patches,
                bugs=e.bugs,
                level=e.patch_level,
                carried_digest=e.carried_digest,
                shipped=e.shipped,
            )
            for e in self.entries
            if e.tag == tag
        ]
        removed = sorted([*(e for e in self.removed if e.tag != tag), *gone], key=lambda e: _order(e.tag))
        return Train(tuple(e for e in self.entries if e.tag != tag), tuple(removed))

    @classmethod
    def load(cls, path: Path, lines: Collection[str]) -> Train:
        """Read and validate the train file; every error is a TrainFileError naming the file and entry.

        Only what the tool writes is accepted: each tag in its one spelling (vX.Y.Z[.postN]) and
        once, no control character in any value, each entry on a release line of `lines` (the names
        patches/lines.toml defines: the caller's Checkout read it), no key the train does not have.
        """
        text = read_text(path, error=TrainFileError, hint="restore patches/train.toml from git")
        data = parse_toml(text, where=str(path), error=TrainFileError)
        unknown = sorted(set(data) - {"release", "removed"})
        if unknown:
            raise TrainFileError(
                f"{path}: unknown top-level key {unknown[0]!r} (the train is [[release]] and [[removed]] tables)"
            )
        raw = data.get("release", [])
        if not isinstance(raw, list):
            raise TrainFileError(f"{path}: `release` must be an array of tables ([[release]])")
        known = tuple(lines)
        _refuse_duplicates(path, raw)
        entries = [_entry(path, index, item, known) for index, item in enumerate(raw)]
        removed = _removed(path, data.get("removed", []), {e.tag for e in entries})
        return cls(tuple(sorted(entries, key=lambda e: _order(e.tag))), removed)

    def require_head(self, path: Path, head: str) -> Train:
        """The train, after proving it records the head (UPSTREAM.toml's tag): vendor/ is that entry's tree.

        An empty train file, or one that lost the head's entry, is no train the tool writes (`rebase`
        records the new head in the same swap as vendor/; `train remove` never drops it): exit 2.
        """
        if head not in self.tags:
            raise TrainFileError(
                f"{path} has no entry for the head {head} (vendor/, UPSTREAM.toml)"
                + ("" if self.entries else ": it holds no release at all"),
                hint=f"restore patches/train.toml from git, or record the head: `python -m release train add {head}`",
            )
        return self

    def dumps(self) -> str:
        """The file's text: a fixed header (tomli-w writes no comments), then every entry, oldest first."""
        releases = [
            {
                **{key: getattr(e, key) for key in TEXT_KEYS},
                "patches": list(e.patches),
                **({"bugs": list(e.bugs)} if e.bugs else {}),
                **({"level": e.level} if e.level else {}),
                **({"carried_digest": e.carried_digest} if e.carried_digest else {}),
                **({"shipped": e.shipped} if e.shipped else {}),
                "pristine": dict(sorted(e.pristine.items())),
                "patched": dict(sorted(e.patched.items())),
            }
            for e in self.entries
        ]
        removed = [
            {
                "tag": e.tag,
                "patches": list(e.patches),
                **({"bugs": list(e.bugs)} if e.bugs else {}),
                "level": e.level,
                **({"carried_digest": e.carried_digest} if e.carried_digest else {}),
                **({"shipped": e.shipped} if e.shipped else {}),
            }
            for e in self.removed
        ]
        tables = {"release": releases} if releases else {}
        if removed:
            tables["removed"] = removed
        return HEADER + (f"\n{tomli_w.dumps(tables)}" if tables else "")


def digest_carried(patches: Iterable[tuple[str, str]]) -> str:
    """`sha256:<hex>` of what a tag carries: each patch's name and what it says and changes
    (Patch.change_digest), in replay order. Any added, changed, dropped or retired patch (retiring adds its
    Applied-Upstream: trailer) gives another digest; a refresh by `rebase` (new context and hunk
    positions) does not."""
    digest = hashlib.sha256()
    for name, text in patches:
        digest.update(f"{name}\0{Patch(name, text).change_digest}\n".encode())
    return f"sha256:{digest.hexdigest()}"


def _order(tag: str) -> tuple[int, int, int, int]:
    parsed = parse_version(tag)
    return parsed[0].key if parsed else (0, 0, 0, -1)


def _refuse_duplicates(path: Path, raw: list[object]) -> None:
    """A tag twice, however spelled ('0.20.1' beside 'v0.20.1'): which entry counts would be a guess."""
    seen: dict[str, tuple[int, str]] = {}
    for index, item in enumerate(raw):
        tag = item.get("tag") if isinstance(item, dict) else None
        if not isinstance(tag, str):
            continue  # _entry says what is wrong with it
        try:
            canonical = canonical_tag(tag)
        except UnknownTagError:
            continue
        if canonical in seen:
            first, spelled = seen[canonical]
            raise TrainFileError(
                f"{path}: {canonical} is listed twice: release #{first + 1} ({spelled!r}) "
                f"and release #{index + 1} ({tag!r})"
            )
        seen[canonical] = (index, tag)


def _removed(path: Path, raw: object, recorded: set[str]) -> tuple[TrainEntry, ...]:
    """The [[removed]] tables: each a tag not in the train, once, with a positive level."""
    if not isinstance(raw, list):
        raise TrainFileError(f"{path}: `removed` must be an array of tables ([[removed]])")
    _refuse_duplicates(path, raw)
    kept: list[TrainEntry] = []
    for index, item in enumerate(raw):
        where = f"{path}: removed #{index + 1}"
        if not isinstance(item, dict) or sorted(set(item) - set(REMOVED_KEYS)):
            raise TrainFileError(f"{where}: a removed tag is a table of {', '.join(REMOVED_KEYS)}")
        tag = _tag(where, item.get("tag"))
        if tag in recorded:
            raise TrainFileError(f"{where} ({tag}): the tag is in the train and removed at once")
        patches, bugs, level, carried = _carried(f"{where} ({tag})", {"level": None, **item})
        shipped = _shipped(f"{where} ({tag})", item)
        kept.append(
            TrainEntry(tag, "", patches=patches, bugs=bugs, level=level, carried_digest=carried, shipped=shipped)
        )
    return tuple(sorted(kept, key=lambda e: _order(e.tag)))


def _tag(where: str, tag: object) -> str:
    """A tag as the tool writes it: a vLLM release tag in its one spelling."""
    if not isinstance(tag, str) or not tag:
        raise TrainFileError(f"{where}: `tag` is missing")
    try:
        canonical = canonical_tag(tag)
    except UnknownTagError:
        raise TrainFileError(f"{where}: tag {tag!r} is not a vLLM release tag (vX.Y.Z or vX.Y.Z.postN)") from None
    if tag != canonical:
        raise TrainFileError(f"{where}: tag {tag!r} must be written {canonical!r}, the one spelling the tool writes")
    return tag


def _carried(where: str, item: dict[str, object]) -> tuple[tuple[str, ...], tuple[str, ...], int, str]:
    """What a tag carries and has, as a [[release]] or [[removed]] table records it: patches, bugs, level, digest.

    An absent `level` is 0 (not recorded); a present one is a positive integer."""
    patches = item.get("patches", [])
    if not isinstance(patches, list) or not all(isinstance(n, str) and is_patch_name(n) for n in patches):
        raise TrainFileError(f"{where}: `patches` must be a list of patch file names (NNNN-slug.patch)")
    bugs = item.get("bugs", [])
    if not isinstance(bugs, list) or not all(isinstance(b, str) and b and not CONTROL_RE.search(b) for b in bugs):
        raise TrainFileError(f"{where}: `bugs` must be a list of bug ids (the `Bug:` ids of the patches)")
    level = item.get("level", 0)
    if not isinstance(level, int) or isinstance(level, bool) or level < ("level" in item):
        raise TrainFileError(f"{where}: `level` {level!r} is not a patch level (a positive integer)")
    carried = item.get("carried_digest", "")
    if not isinstance(carried, str) or (carried and not DIGEST_RE.fullmatch(carried)):
        raise TrainFileError(f"{where}: `carried_digest` {carried!r} is not a digest (sha256:<64 hex digits>)")
    return tuple(patches), tuple(bugs), level, carried


def _shipped(where: str, item: dict[str, object]) -> str:
    shipped = item.get("shipped", "")
    if not isinstance(shipped, str) or (shipped and not DIGEST_RE.fullmatch(shipped)):
        raise TrainFileError(f"{where}: `shipped` {shipped!r} is not a digest (sha256:<64 hex digits>)")
    return shipped


def _entry(path: Path, index: int, item: object, lines: tuple[str, ...]) -> TrainEntry:
    where = f"{path}: release #{index + 1}"
    if not isinstance(item, dict):
        raise TrainFileError(f"{where} is not a table")
    unknown = sorted(set(item) - set(KEYS))
    if unknown:
        raise TrainFileError(f"{where}: unknown key {unknown[0]!r} (an entry has {', '.join(KEYS)})")
    for key in ("tag", "source", "line"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise TrainFileError(f"{where}: `{key}` is missing")
    texts: dict[str, str] = {}
    for key in TEXT_KEYS:
        value = item.get(key, "")
        if not isinstance(value, str):
            raise TrainFileError(f"{where}: `{key}` must be a string")
        if CONTROL_RE.search(value):
            raise TrainFileError(f"{where}: `{key}` {value!r} holds a control character")
        texts[key] = value
    tag = _tag(where, texts["tag"])
    where = f"{where} ({tag})"
    if texts["line"] not in lines:
        raise TrainFileError(
            f"{where}: line {texts['line']!r} is not a release line of patches/lines.toml (lines: {', '.join(lines)})"
        )
    if texts["wheel_sha256"] and not SHA256_RE.fullmatch(texts["wheel_sha256"]):
        raise TrainFileError(f"{where}: wheel_sha256 {texts['wheel_sha256']!r} is not a sha256 hex digest")
    if texts["commit"] and not COMMIT_RE.fullmatch(texts["commit"]):
        raise TrainFileError(f"{where}: commit {texts['commit']!r} is not a git commit id")
    patches, bugs, level, carried = _carried(where, item)
    tables: dict[str, dict[str, str]] = {}
    for key in ("pristine", "patched"):
        table = item.get(key, {})
        if not isinstance(table, dict) or not table:
            raise TrainFileError(f"{where}: [release.{key}] is missing or empty")
        for name, digest in table.items():
            if not (isinstance(digest, str) and SHA256_RE.fullmatch(digest)):
                raise TrainFileError(f"{where}: {key} {name!r} is not a sha256 hex digest")
            if name.startswith("/") or ".." in name.split("/") or CONTROL_RE.search(name):
                raise TrainFileError(f"{where}: {key} {name!r} is not a plain path inside the subtree")
        tables[key] = dict(sorted(table.items()))
    return TrainEntry(
        tag=tag,
        source=texts["source"],
        line=texts["line"],
        wheel=texts["wheel"],
        wheel_sha256=texts["wheel_sha256"],
        commit=texts["commit"],
        flashinfer=texts["flashinfer"],
        patches=patches,
        bugs=bugs,
        level=level,
        carried_digest=carried,
        shipped=_shipped(where, item),
        pristine=tables["pristine"],
        patched=tables["patched"],
    )
