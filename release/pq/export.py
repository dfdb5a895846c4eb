"""`pq export`: the work tree's commits back into patches/ and vendor/, in one journaled swap.

The job as its steps: prove the tree exportable (no git command half-done, nothing uncommitted,
a straight line of non-empty commits on the pristine commit of the tag vendor/ is pinned to),
`git format-patch` base..HEAD with Electron's flags (our isolated git: the bytes do not depend on
the machine), name each mail (release/pq/names.py) and strip its `Patch-Name:` line, validate it
like any patch of the queue, rebuild vendor/ as pristine + the new series and check it against
HEAD's tree, then write patches/ (the patches, `series` with its comments) and vendor/ together
under the repository lock. A patch a release line's series takes as it is may not be dropped or
renamed here: that line would lose it without a word. Nothing is written on any refusal.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from release.core.errors import (
    MalformedPatchError,
    PatchQueueStaleError,
    PatchQueueTreeError,
)
from release.core.journal import Output, commit
from release.core.layout import Layout
from release.core.lock import repo_lock
from release.model.patch import CARRIED_FROM, UPSTREAM_SUBTREE_PREFIX, VARIES, Patch
from release.model.series import EntryKind, Series, parse_entry
from release.pq.names import NAME_RE, NAME_TRAILER, new_name, slug_of, unmark
from release.pq.tree import BASE_TAG, PqState, PqTree
from release.queue.load import Queue
from release.queue.regression import refuse_untested
from release.queue.replay import apply_series
from release.queue.snapshot import Checkout


@dataclass(frozen=True)
class ExportedPatch:
    name: str
    subject: str
    commit: str
    status: str  # "unchanged", "changed" (same name, other bytes) or "added"
    named_by: str  # "Patch-Name", "subject" (the old patch with that subject) or "new"


@dataclass
class Export:
    """What the work tree exports, next to what patches/ and vendor/ hold now."""

    patches: list[ExportedPatch]
    dropped: list[str]
    patch_files: dict[str, bytes]  # the whole new patches/ directory
    vendor: dict[str, bytes]
    changed_paths: list[str]  # relative to the checkout: what the export writes
    notes: list[str] = field(default_factory=list)
    written: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.changed_paths)

    def as_json(self) -> dict[str, object]:
        return {
            "patches": [p.__dict__ for p in self.patches],
            "dropped": self.dropped,
            "changed": self.changed_paths,
            "written": self.written,
            "notes": self.notes,
        }


def export_queue(layout: Layout, path: Path, check_only: bool = False) -> Export:
    with repo_lock(layout, "pq export --check" if check_only else "pq export"):
        tree = PqTree.open(path)
        state = tree.state()
        refuse_line_tree(path, state)
        require_exportable(tree)
        return export_tree(Checkout.load(layout), tree, state, check_only)


def export_tree(checkout: Checkout, tree: PqTree, state: PqState, check_only: bool = False) -> Export:
    """The head's work tree `tree` (its `state`) written back into the checkout: the caller holds the repository
    lock, read the checkout under it, and refused a line's tree and one not exportable."""
    layout, path = checkout.layout, tree.path
    queue = checkout.queue
    if queue.pin.tag != state.tag:
        raise PatchQueueTreeError(
            f"{path} was imported on vllm {state.tag}, but vendor/ is pinned to {queue.pin.tag} now",
            hint="export before a rebase; now make a new tree (`python -m release pq import --dir NEW`) and "
            f"`git cherry-pick` your commits from {path} into it",
        )
    pristine = checkout.pristine()
    if tree.repo.subtree_files_at(state.base) != pristine:
        raise PatchQueueTreeError(
            f"the pristine commit {state.base[:12]} of {path} is not vllm {state.tag}'s pristine subtree any more",
            hint="the first commit is upstream's code and is never edited; start again with `pq import --force`",
        )
    result = compute(checkout, tree, state.base, pristine)
    if check_only:
        if result.changed:
            raise PatchQueueStaleError(
                f"pq export --check: {len(result.changed_paths)} path(s) differ from what {path} exports: "
                + ", ".join(result.changed_paths)
            )
        return result
    if result.changed:
        write(layout, result)
        result.written = True
    tree.save_state(replace(state, synced=tree.head()))
    return result


def refuse_line_tree(path: Path, state: PqState) -> None:
    """The head's commands (`export --check`, `drop`, this export) refuse a release line's tree."""
    if state.line:
        raise PatchQueueTreeError(
            f"{path} is the work tree of release line {state.line} (`pq import --line`), not the head's",
            hint=f"`python -m release pq export --dir {path}` writes the line's variants; this command works on "
            "the head's tree (`python -m release pq import`)",
        )


def require_exportable(tree: PqTree) -> None:
    doing = tree.in_progress()
    if doing:
        raise PatchQueueTreeError(
            f"{doing} is in progress in {tree.path}: finish it (`--continue`) or abort it first",
            hint="the export takes commits only, so that nothing half-done goes into patches/",
        )
    changes = tree.changes()
    if changes:
        shown = ", ".join(line[3:] for line in changes[:3]) + (" ..." if len(changes) > 3 else "")
        raise PatchQueueTreeError(
            f"{tree.path} has {len(changes)} uncommitted or untracked file(s): {shown}",
            hint="commit them into a patch (`git commit`, `git commit --amend`, `git commit --fixup`), or discard "
            "them (`git checkout -- FILE`, `git clean`); the export takes commits only",
        )


def compute(checkout: Checkout, tree: PqTree, base: str, pristine: dict[str, bytes]) -> Export:
    layout, queue = checkout.layout, checkout.queue
    commits = tree.commits(base)
    for sha in commits:
        if tree.is_empty(sha):
            raise PatchQueueTreeError(
                f"commit {sha[:12]} ({tree.subject(sha)}) changes nothing: a patch is never empty",
                hint=f"drop it: `git -C {tree.path} rebase -i {BASE_TAG}` and delete its line",
            )
    marked = [unmark(text) for text in format_patches(layout, tree, base, len(commits))]
    names = name_commits(layout, tree, commits, marked, queue)
    patches = []
    for sha, (name, _), (_, text) in zip(commits, names, marked, strict=True):
        patch = Patch(name, text)
        try:
            patch.validate((UPSTREAM_SUBTREE_PREFIX,))
        except MalformedPatchError as exc:
            raise MalformedPatchError(f"commit {sha[:12]}: {exc}", hint=exc.hint) from None
        patches.append(patch)
    # Every bug patch names its regression test: publish proves each wheel's fixes with it (release/evidence).
    refuse_untested(layout, patches, "not exporting")

    vendor = tree.repo.subtree_files_at("HEAD")
    rebuilt = apply_series(pristine, patches, PatchQueueTreeError)
    if rebuilt != vendor:
        differ = sorted(n for n in set(rebuilt) | set(vendor) if rebuilt.get(n) != vendor.get(n))
        raise PatchQueueTreeError(
            f"pristine + the exported patches does not give HEAD's tree in {', '.join(differ)}",
            hint="a change git's diff cannot carry (a mode or a binary file) is not a patch; undo it",
        )

    old = {p.name: p for p in queue.patches}
    new_names = [p.name for p in patches]
    gone = [name for name in old if name not in new_names]
    renamed = renames([old[name] for name in gone], [p for p in patches if p.name not in old])
    dropped = [name for name in gone if name not in renamed]
    notes = refuse_dropping_what_a_line_takes(checkout, dropped)

    patch_files = checkout.tree(layout.patches)
    notes += rename_in_lines(checkout, renamed, patch_files)
    drop_from_lines(checkout, dropped, patch_files)
    for name in gone:
        patch_files.pop(name, None)
    for patch in patches:
        patch_files[patch.name] = patch.text.encode("utf-8")
    new_series = rewrite_series(queue.series, new_names)
    patch_files["series"] = new_series.dumps().encode("utf-8")
    reorder_lines(checkout, [e.name for e in new_series.entries], patch_files)

    exported = [
        ExportedPatch(
            patch.name,
            patch.subject,
            sha,
            "added" if patch.name not in old else "unchanged" if old[patch.name].text == patch.text else "changed",
            how,
        )
        for sha, patch, (_, how) in zip(commits, patches, names, strict=True)
    ]
    changed = changed_paths(checkout, patch_files, vendor)
    return Export(exported, dropped, patch_files, vendor, changed, notes)


def format_patches(layout: Layout, tree: PqTree, base: str, count: int) -> list[str]:
    """One mail per commit, by our isolated git with Electron's flags (release.core.git.FORMAT_PATCH_FLAGS)."""
    if not count:
        return []
    layout.work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=layout.work, prefix="pq-export-") as tmp:
        files = tree.repo.export(base, Path(tmp))
        if len(files) != count:
            raise PatchQueueTreeError(f"git format-patch wrote {len(files)} mail(s) for {count} commit(s)")
        try:
            return [file.read_bytes().decode("utf-8") for file in files]
        except UnicodeDecodeError:
            raise PatchQueueTreeError(
                "a commit's message or change is not UTF-8 text", hint="patches are UTF-8 text; amend the commit"
            ) from None


def used_names(layout: Layout) -> set[str]:
    """Every patch file name the checkout has used: the queue, the retired, every line's variants."""
    found = {p.name for p in layout.patches.glob("*.patch")}
    found |= {p.name for p in layout.retired.glob("*.patch")} if layout.retired.is_dir() else set()
    found |= {p.name for p in (layout.patches / "lines").glob("*/*.patch")}
    return found


def name_commits(
    layout: Layout, tree: PqTree, commits: list[str], marked: list[tuple[list[str], str]], queue: Queue
) -> list[tuple[str, str]]:
    """Each commit's patch file name and how it got it: its Patch-Name line, the subject of an old
    patch whose name no commit claims, or the next free number and a slug of its subject."""
    retired = {p.name for p in layout.retired.glob("*.patch")} if layout.retired.is_dir() else set()
    claimed: dict[str, str] = {}
    names: list[tuple[str, str] | None] = []
    for sha, (found, _) in zip(commits, marked, strict=True):
        if len(found) > 1:
            raise PatchQueueTreeError(
                f"commit {sha[:12]} ({tree.subject(sha)}) has {len(found)} {NAME_TRAILER}: lines "
                f"({', '.join(found)}): one commit is one patch",
                hint=f"keep one of them (`git -C {tree.path} rebase -i {BASE_TAG}`, reword), or split the commit",
            )
        if not found:
            names.append(None)
            continue
        name = found[0]
        if not NAME_RE.match(name):
            raise PatchQueueTreeError(
                f"commit {sha[:12]}: {NAME_TRAILER}: {name!r} is not a patch file name (NNNN-slug.patch)",
                hint="a name is four digits, '-', lowercase letters, digits and '-', then .patch",
            )
        if name in claimed:
            raise PatchQueueTreeError(
                f"commits {claimed[name][:12]} and {sha[:12]} both say {NAME_TRAILER}: {name}",
                hint="give one of them another name (reword it), or squash them into one patch",
            )
        if name in retired:
            raise PatchQueueTreeError(
                f"commit {sha[:12]} is named {name}, a patch retired to patches/retired/ (upstream took it)",
                hint=f"a new patch takes a new name: drop its {NAME_TRAILER}: line and export again",
            )
        claimed[name] = sha
        names.append((name, "Patch-Name"))
    by_subject: dict[str, str] = {}
    for patch in queue.patches:
        if patch.name not in claimed:
            by_subject.setdefault(patch.subject, patch.name)
    used = used_names(layout) | set(claimed)
    out: list[tuple[str, str]] = []
    for sha, given in zip(commits, names, strict=True):
        if given is None:
            subject = tree.subject(sha)
            old = by_subject.pop(subject, None)
            given = (old, "subject") if old else (new_name(slug_of(subject), used), "new")
            used.add(given[0])
        out.append(given)
    return out


def varies_in(mail: str) -> str | None:
    """The common patch a variant's mail names in `Varies:`, read from its text: a hand-made variant is
    read as it is, never validated, so a half-written one still gets its note."""
    found = re.search(rf"^{VARIES}: (\S+)", mail, re.M)
    return found.group(1) if found else None


def refuse_dropping_what_a_line_takes(checkout: Checkout, dropped: list[str]) -> list[str]:
    """Refuse to drop (or rename) a common patch that a release line's series takes as it is.

    Returns notes for the variants made by hand whose `Varies:` names a dropped patch: the line keeps
    its own variant, but the reference no longer leads anywhere.
    """
    if not dropped:
        return []
    layout = checkout.layout
    notes: list[str] = []
    for line, series_path, series in checkout.own_line_series():
        taken = [e.name for e in series.entries if e.kind == EntryKind.TAKE and e.name in dropped]
        if taken:
            where = series_path.relative_to(layout.root).as_posix()
            raise PatchQueueTreeError(
                f"{where} takes {', '.join(taken)} as it is, and the export drops or renames it: line "
                f"{line.name} would lose it",
                hint=f"keep the commit and its {NAME_TRAILER}: line, or change {where} first (a variant of the line's "
                "own, or another patch)",
            )
        for entry in series.entries:
            variant = line.patch_dir(layout.root) / entry.name
            if entry.kind != EntryKind.PATCH or not variant.is_file():
                continue
            text = checkout.text(variant)
            common = varies_in(text)
            if common in dropped and not re.search(rf"^{CARRIED_FROM}: ", text, re.M):
                notes.append(
                    f"{variant.relative_to(layout.root).as_posix()} says Varies: {common}, "
                    "which is no longer in patches/series"
                )
    return notes


def renames(gone: list[Patch], added: list[Patch]) -> dict[str, str]:
    """{old name: new name} for each patch the export would drop whose change comes back under a new name
    (its commit's `Patch-Name:` line edited): the same diff, else the same subject, one for one."""
    found: dict[str, str] = {}
    for key in ("diff", "subject"):
        for patch in gone:
            if patch.name in found:
                continue
            said = getattr(patch, key)
            match = [p for p in added if getattr(p, key) == said and p.name not in found.values()]
            if len(match) == 1:
                found[patch.name] = match[0].name
    return found


def rename_in_lines(checkout: Checkout, renamed: dict[str, str], patch_files: dict[str, bytes]) -> list[str]:
    """What the release lines say about a renamed patch follows it: each `skip OLD: why` and `take OLD` names
    the new name with its reason, and each variant's `Varies: OLD` (made by hand or by `pq carry`) says the new
    one, so no line loses its variant or skip reason. Returns a note per renamed patch."""
    if not renamed:
        return []
    layout = checkout.layout
    for line, _path, series in checkout.own_line_series():
        folder = line.patch_dir(layout.root).relative_to(layout.patches).as_posix()
        for entry in series.entries:
            if entry.kind in (EntryKind.SKIP, EntryKind.TAKE) and entry.name in renamed:
                series = series.replace(entry.name, replace(entry, name=renamed[entry.name]))
            key = f"{folder}/{entry.name}"
            text = patch_files.get(key, b"").decode("utf-8", "replace")
            common = varies_in(text) if entry.kind == EntryKind.PATCH else None
            if common is not None and common in renamed:
                for trailer in (VARIES, CARRIED_FROM):  # a carried variant's fingerprint names the patch too
                    text = re.sub(
                        rf"^{trailer}: {re.escape(common)}(?=\s)",
                        f"{trailer}: {renamed[common]}",
                        text,
                        count=1,
                        flags=re.M,
                    )
                patch_files[key] = text.encode("utf-8")
        patch_files[f"{folder}/series"] = series.dumps().encode("utf-8")
    return [
        f"{before} is now {after}: every release line's skip, take and Varies: follow it"
        for before, after in renamed.items()
    ]


def reorder_lines(checkout: Checkout, order: list[str], patch_files: dict[str, bytes]) -> None:
    """Each release line's entries for the common patches (its variants, by `Varies:`, its takes and skips) in the
    order of the new patches/series, each in the place one of them held: a reorder in the work tree reorders the
    lines too, which `check` holds to it (release.queue.load.require_accounted)."""
    rank = {name: i for i, name in enumerate(order)}
    layout = checkout.layout
    for line, _path, _series in checkout.own_line_series():
        folder = line.patch_dir(layout.root).relative_to(layout.patches).as_posix()
        key = f"{folder}/series"
        lines = patch_files[key].decode("utf-8").splitlines(keepends=True) if key in patch_files else []
        slots: list[tuple[int, str]] = []  # (index in the file, the common patch its entry is about)
        for index, text in enumerate(lines):
            entry = parse_entry(text)
            if entry is None:
                continue
            common = entry.name
            if entry.kind == EntryKind.PATCH:
                common = varies_in(patch_files.get(f"{folder}/{entry.name}", b"").decode("utf-8", "replace")) or ""
            if common in rank:
                slots.append((index, common))
        wanted = sorted(slots, key=lambda slot: rank[slot[1]])
        if [c for _, c in wanted] == [c for _, c in slots]:
            continue
        moved = list(lines)
        for (index, _), (source, _) in zip(slots, wanted, strict=True):
            moved[index] = lines[source]
        patch_files[key] = "".join(moved).encode("utf-8")


def drop_from_lines(checkout: Checkout, dropped: list[str], patch_files: dict[str, bytes]) -> list[str]:
    """What the tool wrote into the release lines about a dropped patch goes with it: each line's `skip` of it
    and the variants `pq carry` made of it (`Carried-From:`), file and series entry. Returns the paths."""
    if not dropped:
        return []
    layout = checkout.layout
    removed: list[str] = []
    for line, _path, series in checkout.own_line_series():
        folder = line.patch_dir(layout.root).relative_to(layout.patches).as_posix()
        if f"{folder}/series" in patch_files:  # as an earlier step of this export left it (a rename)
            series = Series(tuple(patch_files[f"{folder}/series"].decode("utf-8").splitlines()))
        for entry in series.entries:
            key = f"{folder}/{entry.name}"
            text = patch_files.get(key, b"").decode("utf-8", "replace")
            carried = entry.kind == EntryKind.PATCH and re.search(rf"^{CARRIED_FROM}: ", text, re.M)
            if (entry.kind == EntryKind.SKIP and entry.name in dropped) or (carried and varies_in(text) in dropped):
                series = series.without(entry.name)
                if entry.kind == EntryKind.PATCH:
                    patch_files.pop(key, None)
                    removed.append(f"patches/{key}")
        patch_files[f"{folder}/series"] = series.dumps().encode("utf-8")
    return removed


def rewrite_series(old: Series, names: list[str]) -> Series:
    """The series naming `names` in order, keeping its comments: the header before the first entry,
    each comment block above the entry it precedes, each entry's own line (with a comment after it).
    A `retired NAME` line stays with the entry it precedes, as a comment does: the place where older
    tags replay it."""
    header: list[str] = []
    above: dict[str, list[str]] = {}
    own: dict[str, str] = {}
    pending: list[str] = []
    seen = False
    for line in old.lines:
        parsed = parse_entry(line)
        if parsed is None or parsed.kind == EntryKind.RETIRED:
            pending.append(line)
            continue
        entry = parsed.name
        if seen:
            above[entry] = pending
        else:
            header = pending
        own[entry], pending, seen = line, [], True
    if not seen:
        header, pending = pending, []
    lines = list(header)
    for name in names:
        lines += [*above.get(name, []), own.get(name, name)]
    return Series(tuple(lines + pending))


def changed_paths(checkout: Checkout, patch_files: dict[str, bytes], vendor: dict[str, bytes]) -> list[str]:
    layout = checkout.layout
    out = []
    current = checkout.tree(layout.patches)
    for name in sorted(set(current) | set(patch_files)):
        if current.get(name) != patch_files.get(name):
            out.append(f"patches/{name}")
    subtree = layout.subtree.relative_to(layout.root).as_posix()
    now = checkout.vendor_files()
    for name in sorted(set(now) | set(vendor)):
        if now.get(name) != vendor.get(name):
            out.append(f"{subtree}/{name}")
    return out


def write(layout: Layout, result: Export) -> None:
    """patches/ and vendor/'s subtree as one journaled change (release.core.journal)."""
    outputs = []
    if any(p.startswith("patches/") for p in result.changed_paths):
        outputs.append(Output(layout.patches.relative_to(layout.root).as_posix(), files=result.patch_files))
    subtree = layout.subtree.relative_to(layout.root).as_posix()
    if any(p.startswith(subtree + "/") for p in result.changed_paths):
        outputs.append(Output(subtree, files=result.vendor))
    commit(layout, outputs, f"pq export ({len(result.patches)} patches)")
