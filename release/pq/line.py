"""`pq import --line LINE` and its `pq export`: a release line's variant made by hand, with git.

When `pq carry` names a line that needs a variant made by hand, the import makes the work tree of that
line: its newest train tag's pristine modules (held to the sha256 patches/train.toml records; `--tag`
picks another train tag of the line), then the line's series as commits, with each common patch the
series is silent about (or whose carried variant is stale) mapped onto the line and put in its place,
by one `git am --3way`. The head's pristine tree with patches/series on it goes into the object store
first (release/queue/replay.py, `remember`), in a commit no branch holds, so the merge finds the
pre-image each common patch names. Where a patch does not merge, git's state is left as git leaves it
(conflict markers, `git status`, `git am --continue`), and the import exits 3.

The export writes the commits of those common patches as the line's variants (`Varies:` and
`Carried-From:`, as `pq carry` writes them), each with its series entry, and a changed commit of a
variant the line already has back into its file; it first replays the line's new series on every
train tag of the line, and refuses (nothing written) unless it gives HEAD's tree on the tag imported.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from release.core.errors import BadInputError, PatchQueueTreeError
from release.core.git import WorkRepo
from release.core.hashing import sha256_hex
from release.core.journal import Output, commit
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.core.lock import repo_lock
from release.model.lines import Line
from release.model.patch import CARRIED_FROM, VARIES, Patch
from release.model.series import Entry, EntryKind, Series
from release.model.train import TrainEntry
from release.model.tree import UpstreamTree
from release.pq.carry import fitting_part, holds_on, insertion_point, line_tree
from release.pq.export import format_patches, require_exportable
from release.pq.importer import apply_mails, first_commit, init, into_place, refuse_unwritable
from release.pq.names import unmark
from release.pq.tree import BRANCH, PqState, PqTree
from release.queue.gates import fingerprint
from release.queue.load import Queue, account, is_head, replays_on
from release.queue.replay import Replay, remember, replay_series, start
from release.queue.snapshot import Checkout

HEAD_BLOBS = "refs/pq/head-blobs"  # the head's tree with the series on it: the 3-way bases of the common patches


@dataclass(frozen=True)
class LineImported:
    path: Path
    line: str
    tag: str
    patches: list[str]  # the commits it meant to make, in order
    wanted: list[str]  # the common patches put in for the line
    stopped: tuple[str, str] | None  # the patch `git am` stopped at, and git's words
    replaced: bool
    left_out: dict[str, list[str]] = field(default_factory=dict)  # common patch -> its files the line lacks


@dataclass(frozen=True)
class LinePlan:
    """What the line's tree replays: its series with the common patches it lacks put in their places."""

    series: Series
    patches: list[tuple[str, Patch]]
    wanted: list[str]
    left_out: dict[str, list[str]] = field(default_factory=dict)  # common patch -> its files the line lacks


def pick_tag(checkout: Checkout, line_name: str | None, tag: str | None) -> tuple[Line, TrainEntry]:
    """The line and train tag of `--line` (its newest train tag) or `--tag`; exit 2 for anything else."""
    lines = checkout.lines
    entries = checkout.train.entries if checkout.train is not None else []
    if tag is not None:
        found = [e for e in entries if e.tag == tag and (line_name is None or e.line == line_name)]
        if not found:
            raise BadInputError(
                f"{tag} is not a train tag{f' of line {line_name}' if line_name else ''} (patches/train.toml)"
            )
        entry = found[0]
    else:
        on_line = [e for e in entries if e.line == line_name]
        if not on_line:
            raise BadInputError(f"line {line_name} has no train tag in patches/train.toml to import on")
        entry = on_line[-1]
    line = lines.get(entry.line)
    if is_head(checkout.layout, line):
        raise BadInputError(
            f"{line.name} is the head line: its tree is `python -m release pq import` without --line or --tag"
        )
    return line, entry


def plan(checkout: Checkout, line: Line, tag: str) -> LinePlan:
    """The line's series, each common patch it is silent about (or carried from another version of) mapped
    onto the line and put before the line's entry of the next common patch, as `pq carry` puts it."""
    series = checkout.series(line)
    said = account(checkout.entries(line))
    mapped: dict[str, Patch] = {}
    left_out: dict[str, list[str]] = {}
    for patch in checkout.queue.patches:
        entry = said.get(patch.name)
        if entry is not None and not stale(checkout, line, entry, patch):
            continue
        if entry is not None:
            series = series.without(entry.name)
        # The parts of the patch whose files the line has; a file it lacks is left out (the import says which).
        variant, unmapped = fitting_part(patch, line)
        if unmapped:
            left_out[patch.name] = unmapped
        if variant is None:  # nothing of it is on the line: its variant is a commit of the maintainer's own
            continue
        before = insertion_point(checkout, line, series, patch.name)
        series = series.insert(Entry(EntryKind.PATCH, patch.name), before)
        mapped[patch.name] = variant
    patches = []
    for entry in series.entries:
        found = mapped.get(entry.name) if entry.kind == EntryKind.PATCH else None
        found = found or checkout.entry_patch(line, entry)
        if found is not None and replays_on(found, tag):
            patches.append((entry.name, found))
    return LinePlan(series, patches, list(mapped), left_out)


def stale(checkout: Checkout, line: Line, entry: Entry, common: Patch) -> bool:
    """A variant `pq carry` made from another version of the common patch."""
    if entry.kind != EntryKind.PATCH:
        return False
    variant = checkout.entry_patch(line, entry)
    made_from = variant.carried_from if variant is not None else ""
    return bool(made_from) and made_from != fingerprint(common)


def import_line(
    layout: Layout, path: Path, line_name: str | None, tag: str | None, force: bool = False
) -> LineImported:
    refuse_unwritable(path)
    with repo_lock(layout, "pq import --line"):
        checkout = Checkout.load(layout)
        queue = checkout.queue
        line, entry = pick_tag(checkout, line_name, tag)
        tree = line_tree(layout, line, entry)
        if isinstance(tree, str):
            raise PatchQueueTreeError(tree)
        made = plan(checkout, line, entry.tag)
        head = checkout.pristine()
        stopped, replaced = into_place(
            path, force, lambda staging: build_line(staging, layout, queue, head, line, tree.files, entry.tag, made)
        )
        names = [name for name, _ in made.patches]
        return LineImported(path, line.name, entry.tag, names, made.wanted, stopped, replaced, made.left_out)


def build_line(
    path: Path,
    layout: Layout,
    queue: Queue,
    head: dict[str, bytes],
    line: Line,
    files: dict[str, bytes],
    tag: str,
    made: LinePlan,
) -> tuple[str, str] | None:
    """The head's blobs (no branch holds them), the tag's pristine commit, then the plan's patches."""
    head_repo = init(path)
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-pq-") as tmp:
        blobs = remember(head_repo, Path(tmp), head, queue.patches)
    head_repo.run("update-ref", HEAD_BLOBS, blobs)
    head_repo.run("update-ref", "-d", f"refs/heads/{BRANCH}")  # the branch starts again at the tag's tree
    head_repo.run("rm", "-r", "--quiet", "--cached", "--", UPSTREAM_SUBTREE)
    head_repo.run("clean", "-dfxq", "--", UPSTREAM_SUBTREE)
    repo = WorkRepo(path, line.root)
    base = first_commit(
        repo,
        files,
        f"vllm {tag}: the pristine modules of line {line.name}\n\n"
        "Made by `python -m release pq import --line` from the train tag's recorded source.\n"
        "Every commit after this one is one entry of the line's series; `python -m release pq export` "
        "writes them back.",
    )
    stopped = apply_mails(repo, made.patches, "--3way", "--keep")
    # Synced with patches/ only when it is the line's series as it is; else a new import asks for --force.
    synced = repo.head() if stopped is None and not made.wanted else base
    PqTree(path).save_state(PqState(str(layout.root), tag, base, synced, line.name, tuple(made.wanted)))
    return stopped


@dataclass(frozen=True)
class LineExport:
    line: str
    written: list[str]  # paths in the checkout
    variants: list[str]  # the variants written or changed


def export_line(layout: Layout, path: Path) -> LineExport:
    with repo_lock(layout, "pq export"):
        tree = PqTree.open(path)
        state = tree.state()
        require_exportable(tree)
        checkout = Checkout.load(layout)
        line, entry = pick_tag(checkout, state.line, state.tag)
        pristine = WorkRepo(tree.path, line.root).subtree_files_at(state.base)
        if {name: sha256_hex(data) for name, data in pristine.items()} != entry.pristine:
            raise PatchQueueTreeError(
                f"the pristine commit of {path} is not {state.tag}'s modules as patches/train.toml records them",
                hint="the first commit is upstream's code and is never edited; start again with `pq import --force`",
            )
        files, series, variants = exported_files(checkout, line, tree, state)
        patches = [p for e in series.entries if (p := variant_or_entry(checkout, line, e, files)) is not None]
        refuse_unless_it_holds(checkout, line, entry, tree, pristine, patches)
        folder = line.patch_dir(layout.root).relative_to(layout.root).as_posix()
        files["series"] = series.dumps().encode("utf-8")
        now = checkout.tree(line.patch_dir(layout.root))
        written = [f"{folder}/{name}" for name in sorted(files) if now.get(name) != files[name]]
        if written:
            commit(layout, [Output(folder, files=files)], f"pq export --line {line.name}")
        tree.save_state(PqState(state.root, state.tag, state.base, tree.head(), state.line, state.wanted))
        return LineExport(line.name, written, variants)


def exported_files(
    checkout: Checkout, line: Line, tree: PqTree, state: PqState
) -> tuple[dict[str, bytes], Series, list[str]]:
    """The line folder's new files, its new series, and the variants the commits give."""
    layout, queue = checkout.layout, checkout.queue
    commits = tree.commits(state.base)
    files = checkout.tree(line.patch_dir(layout.root))
    series = checkout.series(line)
    said = account(checkout.entries(line))
    variants = []
    for sha, text in zip(commits, format_patches(layout, tree, state.base, len(commits)), strict=True):
        names, mail = unmark(text)
        if len(names) != 1:
            raise PatchQueueTreeError(
                f"commit {sha[:12]} ({tree.subject(sha)}) needs one Patch-Name: line: a line's entry is named "
                "after the common patch it varies",
                hint="reword it (`git rebase -i pristine`) and add `Patch-Name: NNNN-slug.patch`",
            )
        name = names[0]
        common = next((p for p in queue.patches if p.name == name), None)
        old = said.get(name)
        if name in state.wanted and common is not None:
            made = Patch(name, mail).with_trailer(VARIES, name).with_trailer(CARRIED_FROM, fingerprint(common))
        elif name in files and name != "series":
            made = Patch(name, mail)
        elif common is not None and (old is None or old.kind == EntryKind.SKIP):
            # A commit of the maintainer's own for a common patch the line is silent about or skips (none of
            # its files is on the line, or only some): the line's variant, made by hand (no Carried-From:).
            made = Patch(name, mail).with_trailer(VARIES, name)
        elif common is None and old is None:
            raise PatchQueueTreeError(
                f"commit {sha[:12]} ({tree.subject(sha)}) is named {name}, which is no common patch of "
                "patches/series and no entry of the line's series",
                hint="a line's variant takes the name of the common patch it varies: reword its Patch-Name: line",
            )
        else:
            continue  # a common patch the line takes as it is: the replay below holds it to HEAD's tree
        if not (name in files and name != "series" and name not in state.wanted):
            if old is not None:
                series = series.without(old.name)
            where = insertion_point(checkout, line, series, name)
            series = series.insert(Entry(EntryKind.PATCH, name), where)
        made.validate(line.prefixes)
        if name in files and Patch(name, files[name].decode("utf-8")).change_digest == made.change_digest:
            # The same change as the file the line has, exported from another tag's tree (other `index` lines
            # and hunk positions): the file stays as it is, so an import and export with no change write nothing.
            continue
        files[name] = made.text.encode("utf-8")
        variants.append(name)
    return files, series, variants


def variant_or_entry(checkout: Checkout, line: Line, entry: Entry, files: dict[str, bytes]) -> Patch | None:
    if entry.kind == EntryKind.PATCH and entry.name in files:
        return Patch(entry.name, files[entry.name].decode("utf-8"))
    return checkout.entry_patch(line, entry)


def refuse_unless_it_holds(
    checkout: Checkout,
    line: Line,
    entry: TrainEntry,
    tree: PqTree,
    pristine: dict[str, bytes],
    patches: list[Patch],
) -> None:
    """The line's new series gives HEAD's tree on the tag imported (`pristine`) and replays on every train tag
    of the line."""
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-pq-") as tmp:
        repo = WorkRepo.create(Path(tmp) / "repo", line.root)
        start(repo, Path(tmp), pristine, f"vllm {entry.tag} (pristine)")
        mine = [p for p in patches if replays_on(p, entry.tag)]
        stopped = replay_series(repo, Path(tmp), mine, Replay(), UpstreamTree(entry.tag, entry.source, pristine))
        got = repo.subtree_files()
    if stopped is not None or got != WorkRepo(tree.path, line.root).subtree_files_at("HEAD"):
        raise PatchQueueTreeError(
            f"the line's series as exported does not give HEAD's tree of {tree.path} on {entry.tag}"
            + (f" ({stopped.name} does not apply)" if stopped is not None else ""),
            hint="a change to a patch the line takes as it is goes into patches/ through the head's tree; "
            "nothing was written",
        )
    for other in checkout.require_train().entries:
        if other.line == line.name and other.tag != entry.tag:
            problem = holds_on(checkout.layout, line, other, patches, pristine)
            if problem:
                raise PatchQueueTreeError(f"line {line.name}: {problem}; nothing was written")


def is_line_tree(path: Path) -> bool:
    """A work tree `pq import --line` made (the head's tree and any other directory: False)."""
    tree = PqTree(path)
    return tree.is_ours() and bool(tree.state().line)
