"""`pq carry PATCH`: a new or changed common patch, carried onto every older release line.

Per line that is silent about the patch (or whose variant `pq carry` made from an older version of
it), the job as its steps:
1. map the patch's head paths onto the line's files (lines.toml `[line.maps]`; a head path inside the
   line's own modules maps to itself); a file with no counterpart on the line cannot be carried;
2. in a scratch repository: the head's tree just before the patch (the pinned pristine tree, recovered
   from vendor/, with the patches before it), so that `git am --3way` finds the pre-image blobs the
   patch names; then the newest train tag of the line (its modules read from the recorded source and
   held to the recorded sha256), with the line's own entries that come before the patch replayed;
3. classify the mapped patch as `rebase` does (apply, reverse-apply, the semantic check, `git am
   --3way`; never fuzz): it applies (the variant is its `git format-patch`, with `Varies:` and
   `Carried-From:` added to the common patch's message), its change is already there, or it conflicts;
4. replay the line's whole new series on every train tag of the line (each replay first holds the
   newest tag with the series on it, so a later patch on a file merges 3-way from its blobs): a variant
   that does not hold on each of them is not written;
5. write each line's variant and series entry (before the line's entry of the next common patch) in
   one journaled change, and report every line: written, updated, up to date, taken or skipped as its
   series says, a hand-made variant left as it is, or one that needs a hand-made variant (and why);
6. replay the head line's series on every train tag of the head line (its older tags too, from the
   head's pristine tree with the series on it, as `train add` does) and report the first tag where it
   conflicts: `pq carry` says so before `train add` does, and exits 3.

`--all` does this for every patch of patches/series, in order, under one lock.

`pq skip PATCH --line LINE --reason WHY` writes the other answer a line may give: it does without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from release.core.errors import BadInputError, OutputNotWritableError, PatchQueueTreeError, UnknownPatchError
from release.core.files import present
from release.core.git import WorkRepo
from release.core.journal import Output, commit, write_atomic
from release.core.layout import UPSTREAM_SUBTREE, Layout, writable_dir_problem
from release.core.lock import repo_lock
from release.model.lines import Line
from release.model.outcome import PatchStatus
from release.model.patch import CARRIED_FROM, DIFF_FILE_RE, VARIES, Patch
from release.model.series import Entry, EntryKind, Series, control_problem
from release.model.train import Train, TrainEntry
from release.model.tree import UpstreamTree
from release.pristine.sources import fetch
from release.queue.gates import fingerprint  # what Carried-From: records; `check` compares the same
from release.queue.load import Queue, account, is_head
from release.queue.replay import Replay, apply_series, replay_series
from release.queue.replay_cache import replay_tree
from release.queue.snapshot import Checkout
from release.queue.upstreamed import classify

REPORT_DIR = "reports/pq-carry"
MARKDOWN, JSON = "carry-report.md", "carry-report.json"


@dataclass
class LineCarry:
    line: str
    result: str  # written | updated | up-to-date | takes | skips | hand-made | needs-variant
    detail: str
    variant: str = ""  # the variant's path in the checkout, where there is one
    tags: list[str] = field(default_factory=list)  # the train tags it was tried on
    # The classes the variant changes that none of the line's backends builds (lines.toml `live`/`builds`).
    unused_classes: list[str] = field(default_factory=list)


CLASS_RE = re.compile(r"class (\w+)\b")


def classes_changed(patch: Patch) -> list[str]:
    """The top-level classes whose code a patch's hunks change, in order: each hunk starts in the class its
    heading names (git's function context: the last top-level line above it) and moves to each top-level
    `class` line inside it; another top-level line (a function, an assignment) leaves the class."""
    found: list[str] = []
    for hunk in patch.hunks:
        heading = hunk.header.split("@@", 2)[-1].strip()
        match = CLASS_RE.match(heading)
        current = match.group(1) if match else None
        for text in hunk.lines:
            code = text[1:]
            if code.strip() and not code.startswith((" ", "\t", "#", "@", ")")):
                match = CLASS_RE.match(code)
                current = match.group(1) if match else None
            if text[:1] in "+-" and current is not None and current not in found:
                found.append(current)
    return found


def unused_classes(line: Line, patch: Patch) -> list[str]:
    """The classes `patch` changes on `line` that none of the line's backends builds (its `live` classes, which
    `builds` maps each backend to): a variant whose change landed there (a conflict resolved into the base
    class the all-gather class shares) is named in the report. Empty when the line names no classes."""
    if not line.live_classes:
        return []
    return [name for name in classes_changed(patch) if name not in line.live_classes]


def noted(done: LineCarry, line: Line, patch: Patch | None) -> LineCarry:
    """`done` with the classes the variant changes that the line's backends do not build, said in its detail."""
    unused = unused_classes(line, patch) if patch is not None else []
    if not unused:
        return done
    done.unused_classes = unused
    done.detail += (
        f"; it changes {', '.join(unused)}, which none of the line's backends builds (they build "
        f"{', '.join(line.live_classes)}, patches/lines.toml `builds`): check that the change belongs there"
    )
    return done


@dataclass
class CarryReport:
    patch: str
    lines: list[LineCarry]
    written: list[str] = field(default_factory=list)  # paths the run changed
    # The head line's series on every train tag of the head line: `replays`, or `conflicts` (which tag, why).
    head: LineCarry | None = None

    @property
    def head_conflicts(self) -> bool:
        return self.head is not None and self.head.result == "conflicts"

    @property
    def silent(self) -> list[str]:
        """The lines that still say nothing about the patch."""
        return [c.line for c in self.lines if c.result == "needs-variant"]

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "silent": self.silent}, indent=2) + "\n"

    def to_markdown(self) -> str:
        out = [f"# Carry {self.patch} onto the release lines", "", "| line | result | tags | detail |"]
        out += ["| --- | --- | --- | --- |"]
        for c in self.lines:
            out.append(f"| `{c.line}` | **{c.result}** | {', '.join(c.tags) or '-'} | {c.detail} |")
        if self.head is not None:
            h = self.head
            out.append(f"| `{h.line}` (head) | **{h.result}** | {', '.join(h.tags) or '-'} | {h.detail} |")
        out.append("")
        out.append(f"Written: {', '.join(f'`{p}`' for p in self.written) or 'nothing'}.")
        if self.silent:
            out += [
                "",
                f"Needs a hand-made variant: {', '.join(self.silent)}. Until each says something about "
                f"{self.patch}, `check` and `train check` refuse (exit 2): put a variant of the line's own in "
                f"patches/lines/<line>/ (its message with `Varies: {self.patch}`) and name it in the line's "
                f"series, or `python -m release pq skip {self.patch} --line LINE --reason WHY`.",
            ]
        return "\n".join(out) + "\n"


def carry(layout: Layout, name: str, only: list[str] | None = None, report_dir: Path | None = None) -> CarryReport:
    """Carry one patch onto the older lines; the head line's series is replayed on its every train tag."""
    refuse_unwritable_report(layout, report_dir)
    with repo_lock(layout, "pq carry"):
        checkout = Checkout.load(layout)
        report = carry_one(checkout, common_patch(checkout.queue, name), only)
        # The head line's series is patches/series, which carrying never writes: the checkout as read holds it.
        report.head = head_holds(checkout)
        write_report(layout, [report], report_dir)
        return report


def carry_all(layout: Layout, only: list[str] | None = None, report_dir: Path | None = None) -> list[CarryReport]:
    """Carry every patch of patches/series, in order, each seeing the lines as the ones before it left them.

    The patches are carried one after the other in a staged copy of the checkout's patches/ and vendor/,
    and what they wrote goes into the checkout as one journaled change: a kill at any instant leaves
    every line as it was or every patch carried, never 0002 carried and 0003 not."""
    refuse_unwritable_report(layout, report_dir)
    with repo_lock(layout, "pq carry --all"), tempfile.TemporaryDirectory(prefix="vllm-fused-moe-carry-") as tmp:
        stage = staged_checkout(layout, Path(tmp) / "checkout")
        checkout = Checkout.load(stage)  # the copy made under the lock: the checkout as the command found it
        reports = []
        for patch in checkout.queue.patches:
            report = carry_one(checkout, patch, only, staged=True)
            reports.append(report)
            if report.written:
                # The next patch is carried onto the lines as this one left them: the staged copy, read again.
                checkout = Checkout.load(stage)
        if reports:
            reports[-1].head = head_holds(checkout)
        folders = sorted({path.rsplit("/", 1)[0] for report in reports for path in report.written})
        if folders:
            # The staged copy as the last patch that wrote left it (its checkout read after that write).
            outputs = [Output(f, files=checkout.tree(stage.root / f)) for f in folders]
            commit(layout, outputs, "pq carry --all")
        write_report(layout, reports, report_dir)
        return reports


def staged_checkout(layout: Layout, root: Path) -> Layout:
    """A copy of what carrying reads and writes (patches/, vendor/, the scan data), links kept as links."""
    for part in ("patches", "vendor"):
        shutil.copytree(layout.root / part, root / part, symlinks=True)
    stage = Layout(root)
    if present(layout.affected_json):
        stage.affected_json.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(layout.affected_json, stage.affected_json, follow_symlinks=False)
    return stage


def refuse_unwritable_report(layout: Layout, report_dir: Path | None) -> None:
    directory = report_dir or layout.root / REPORT_DIR
    problem = writable_dir_problem(directory)
    if problem:  # bad input, before any work: not a failure once the lines are carried
        raise OutputNotWritableError(f"cannot write the report to {directory}: {problem}")


def head_holds(checkout: Checkout) -> LineCarry | None:
    """The head line's series (a retired patch too where a tag is older than its upstream release) on every
    train tag of the head line, each from the head's pristine tree with the series on it; the first that
    conflicts is named. None without a train or a head line."""
    head = checkout.head_line()
    if head is None or checkout.train is None:
        return None
    tags = [e for e in checkout.train.entries if e.line == head.name]
    pristine = checkout.pristine()
    queue = checkout.queue
    for entry in tags:
        patches = checkout.tag_patches(head, entry.tag)
        tree = fetch(entry.tag, entry.recorded_source(), None, lazy=True)
        if tree.file_hashes() != entry.pristine:
            detail = f"{entry.tag}'s files are not what patches/train.toml records (`python -m release train check`)"
            return LineCarry(head.name, "conflicts", detail, tags=[entry.tag])
        made_on = pristine if pristine and pristine != tree.files else None  # the pin: its own replay writes the blobs
        # The replay `train add` and `train check` make of this tag next, kept by its inputs (queue/replay_cache.py).
        replayed = replay_tree(tree, UPSTREAM_SUBTREE, made_on, queue.patches, patches)
        stopped = replayed.conflict
        where = ", ".join(replayed.unmerged)
        if stopped is not None:
            detail = (
                f"{stopped.name} conflicts on {entry.tag}{f' in {where}' if where else ''}: it neither applies nor "
                f"3-way merges (never fuzz); `train add` refuses {entry.tag} until the head line's series holds there "
                '(docs/patch-queue.md, "A head line tag that needs a variant")'
            )
            return LineCarry(head.name, "conflicts", detail, tags=[e.tag for e in tags])
    return LineCarry(head.name, "replays", f"the series replays on every train tag of the line ({len(tags)})",
                     tags=[e.tag for e in tags])  # fmt: skip


def carry_one(checkout: Checkout, patch: Patch, only: list[str] | None, staged: bool = False) -> CarryReport:
    """One patch onto the older lines (each line's new files committed in one journaled change; `staged`:
    written straight into the checkout's tree, a staged copy that `carry_all` swaps into the checkout at the
    end)."""
    layout = checkout.layout
    lines = [line for line in checkout.lines.lines if not is_head(layout, line)]
    if only:
        unknown = sorted(set(only) - {line.name for line in lines})
        if unknown:
            raise BadInputError(f"no release line {', '.join(unknown)} besides the head's in patches/lines.toml")
        lines = [line for line in lines if line.name in only]
    head_before = head_tree_before(checkout, patch)
    train = checkout.require_train()
    report = CarryReport(patch.name, [])
    outputs = []
    # Lines are independent (each its own scratch repositories and release reads), as train check's tags are.
    with ThreadPoolExecutor(min(4, os.cpu_count() or 1, max(len(lines), 1))) as pool:
        carried = list(pool.map(lambda line: carry_line(checkout, patch, line, head_before, train), lines))
    for line, (done, files) in zip(lines, carried, strict=True):
        report.lines.append(done)
        if files is not None:
            folder = line.patch_dir(layout.root)
            outputs.append(Output(folder.relative_to(layout.root).as_posix(), files=files))
            report.written += [f"{folder.relative_to(layout.root).as_posix()}/{n}" for n in (patch.name, "series")]
    if outputs and staged:
        for output in outputs:
            folder = layout.root / output.target
            shutil.rmtree(folder, ignore_errors=True)
            for name, data in (output.files or {}).items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_bytes(data)
    elif outputs:
        commit(layout, outputs, f"pq carry {patch.name}")
    return report


def common_patch(queue: Queue, name: str) -> Patch:
    found = [p for p in queue.patches if p.name == name or p.name.split("-", 1)[0] == name]
    if len(found) != 1:
        raise UnknownPatchError(
            f"{name!r} is not one patch of patches/series ({', '.join(p.name for p in queue.patches) or 'none'})"
        )
    return found[0]


def head_tree_before(checkout: Checkout, patch: Patch) -> dict[str, bytes]:
    """The head's subtree as the patch was made against: pristine (from vendor/) + the patches before it."""
    queue = checkout.queue
    before = queue.patches[: [p.name for p in queue.patches].index(patch.name)]
    return apply_series(checkout.pristine(), before, PatchQueueTreeError)


def carry_line(
    checkout: Checkout, patch: Patch, line: Line, head_before: dict[str, bytes], train: Train
) -> tuple[LineCarry, dict[str, bytes] | None]:
    """One line: what it says about the patch, or its carried variant (and the line folder's new files)."""
    layout = checkout.layout
    said = account(checkout.entries(line)).get(patch.name)
    existing: Patch | None = None
    if said is not None and said.kind == EntryKind.SKIP:
        return LineCarry(line.name, "skips", f"its series: skip {patch.name}: {said.reason}"), None
    if said is not None and said.kind == EntryKind.TAKE:
        return LineCarry(line.name, "takes", "its series takes the common patch as it is"), None
    if said is not None:
        existing = checkout.entry_patch(line, said)
        where = f"patches/lines/{line.name}/{said.name}"
        assert existing is not None
        made_from = existing.carried_from
        if not made_from:
            done = LineCarry(line.name, "hand-made", f"{where} varies it, made by hand: left as it is", where)
            return noted(done, line, existing), None
        if made_from == fingerprint(patch):
            done = LineCarry(line.name, "up-to-date", f"{where} was carried from this very patch", where)
            return noted(done, line, existing), None
    tags = [e for e in train.entries if e.line == line.name]
    if not tags:
        return LineCarry(line.name, "needs-variant", "no train tag of the line to carry it onto"), None
    mapped, unmapped = map_patch(patch, line)
    if unmapped:
        listed = ", ".join(unmapped)
        detail = f"the line has no counterpart of {listed} (patches/lines.toml [line.maps])"
        return LineCarry(line.name, "needs-variant", detail, tags=[e.tag for e in tags]), None
    series = checkout.series(line)
    if existing is not None:
        series = series.without(existing.name)
    before = insertion_point(checkout, line, series, patch.name)
    entries = series.entries
    cut = next((i for i, e in enumerate(entries) if e.name == before), len(entries))
    preceding = [p for e in entries[:cut] if (p := checkout.entry_patch(line, e)) is not None]
    newest = tags[-1]
    tree = line_tree(layout, line, newest)
    if isinstance(tree, str):
        return LineCarry(line.name, "needs-variant", tree, tags=[newest.tag]), None
    made = make_variant(line, tree, preceding, mapped, head_before)
    if isinstance(made, str):
        return LineCarry(line.name, "needs-variant", made, tags=[newest.tag]), None
    variant = made.with_trailer(VARIES, patch.name).with_trailer(CARRIED_FROM, fingerprint(patch))
    variant.validate(line.prefixes)
    new_series = series.insert(Entry(EntryKind.PATCH, variant.name), before)
    following = [p for e in entries[cut:] if (p := checkout.entry_patch(line, e)) is not None]
    replayed = [*preceding, variant, *following]
    for entry in tags:
        problem = holds_on(layout, line, entry, replayed, tree.files)
        if problem:
            return LineCarry(line.name, "needs-variant", problem, tags=[e.tag for e in tags]), None
    files = checkout.tree(line.patch_dir(layout.root))
    if existing is not None:
        files.pop(existing.name, None)
    files[variant.name] = variant.text.encode("utf-8")
    files["series"] = new_series.dumps().encode("utf-8")
    where = f"patches/lines/{line.name}/{variant.name}"
    what = "updated" if existing is not None else "written"
    detail = f"{where}: applies on every train tag of the line ({len(tags)})"
    return noted(LineCarry(line.name, what, detail, where, [e.tag for e in tags]), line, variant), files


def fitting_part(patch: Patch, line: Line) -> tuple[Patch | None, list[str]]:
    """The part of `patch` whose files the line has (each file's section of the diff kept or left out whole),
    mapped onto the line; and the paths left out. None: no file of the patch is on the line."""
    unmapped = sorted({path for path in patch.files if line.map_path(path) is None})
    if not unmapped:
        return map_patch(patch, line)[0], []
    start = re.search(r"^diff --git ", patch.text, re.M)
    if start is None:
        return None, unmapped
    sections = re.split(r"(?=^diff --git )", patch.text[start.start() :], flags=re.M)
    kept = [s for s in sections if (m := DIFF_FILE_RE.match(s.split("\n", 1)[0])) and m.group("b") not in unmapped]
    if not kept:
        return None, unmapped
    tail = re.search(r"^-- \n", sections[-1], re.M)  # the mail's signature, after the last file's section
    if tail is not None and not kept[-1].endswith(sections[-1][tail.start() :]):
        kept[-1] += sections[-1][tail.start() :]
    part = Patch(patch.name, patch.text[: start.start()] + "".join(kept))
    return map_patch(part, line)[0], unmapped


def map_patch(patch: Patch, line: Line) -> tuple[Patch, list[str]]:
    """The patch with each file header's head path replaced by the line's file; and the paths with none."""
    unmapped = sorted({path for path in patch.files if line.map_path(path) is None})
    if unmapped:
        return patch, unmapped
    out: list[str] = []
    in_header = False
    lines = patch.text.split("\n")
    start = next(i for i, text in enumerate(lines) if text.startswith("diff --git "))
    for text in lines[start:]:
        match = DIFF_FILE_RE.match(text)
        if match:
            in_header = True
            text = f"diff --git a/{line.map_path(match.group('a'))} b/{line.map_path(match.group('b'))}"
        elif text.startswith("@@"):
            in_header = False
        elif in_header and text.startswith(("--- a/", "+++ b/")):
            text = f"{text[:6]}{line.map_path(text[6:])}"
        out.append(text)
    return Patch(patch.name, "\n".join([*lines[:start], *out])), []


def insertion_point(checkout: Checkout, line: Line, series: Series, name: str) -> str | None:
    """The entry of `series` the patch's entry goes before: the first that accounts for a later common patch."""
    order = [e.name for e in checkout.queue.series.entries]
    later = set(order[order.index(name) + 1 :])
    for entry in series.entries:
        patch = checkout.entry_patch(line, entry) if entry.kind == EntryKind.PATCH else None
        common = (patch.varies if patch is not None else None) or entry.name
        if common in later:
            return entry.name
    return None


def line_tree(layout: Layout, line: Line, entry: TrainEntry) -> UpstreamTree | str:
    """A train tag's pristine modules of the line, held to the sha256 the train recorded (or why not)."""
    tree = fetch(entry.tag, entry.recorded_source(), line, lazy=True)
    if tree.file_hashes() != entry.pristine:
        return f"{entry.tag}'s modules are not what patches/train.toml records (`python -m release train check`)"
    return tree


def make_variant(
    line: Line, tree: UpstreamTree, preceding: list[Patch], mapped: Patch, head_before: dict[str, bytes]
) -> Patch | str:
    """The mapped patch as it applies on `tree` (the line's newest train tag) after the line's preceding
    entries, or why not."""
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-carry-") as tmp:
        work = Path(tmp)
        # The head's blobs first (under the head's paths), so that --3way finds the pre-image the patch names.
        WorkRepo.create(work / "repo", UPSTREAM_SUBTREE).commit_subtree(head_before, "head: the patch's pre-image")
        repo = WorkRepo(work / "repo", line.root)
        repo.commit_subtree(tree.files, f"vllm {tree.tag} (pristine)")
        stopped = replay_series(repo, work, preceding, Replay(), tree)
        if stopped is not None:
            return f"the line's {stopped.name} does not replay on {tree.tag} (`python -m release train check`)"
        base = repo.head()
        decided = classify(repo, mapped, work / "patches")
        if decided.status == PatchStatus.CONFLICT:
            conflicted = ", ".join(repo.unmerged_paths()) or ", ".join(line.map_path(f) or f for f in mapped.files)
            repo.run("am", "--abort", check=False)
            return f"conflicts on {tree.tag} in {conflicted}: it neither applies nor 3-way merges (never fuzz)"
        if decided.status == PatchStatus.UPSTREAM:
            return f"its change is already in {tree.tag}'s modules ({decided.how}): skip it with that reason"
        [exported] = repo.export(base, work / "out")
        return Patch(mapped.name, exported.read_bytes().decode("utf-8"))


def holds_on(
    layout: Layout, line: Line, entry: TrainEntry, patches: list[Patch], made_on: dict[str, bytes]
) -> str | None:
    """Why the line's new series does not replay on this train tag, or None. `made_on` is the tree the
    series was made on (the line's newest train tag): the series goes on it first, for its blobs."""
    tree = line_tree(layout, line, entry)
    if isinstance(tree, str):
        return tree
    seed = made_on if made_on and made_on != tree.files else None
    # The replay `train add` and `train check` make of this tag after it, kept by its inputs (queue/replay_cache.py).
    stopped = replay_tree(tree, line.root, seed, patches, patches).conflict
    if stopped is not None:
        return f"applies on the newest tag of the line, but {stopped.name} conflicts on {entry.tag}"
    return None


def reports_markdown(reports: list[CarryReport]) -> str:
    return "\n".join(r.to_markdown() for r in reports)


def reports_json(reports: list[CarryReport]) -> str:
    """One patch: its report; several (`--all`): {"reports": [...], "silent": {patch: [lines]}}."""
    if len(reports) == 1:
        return reports[0].to_json()
    every = [{**asdict(r), "silent": r.silent} for r in reports]
    return json.dumps({"reports": every, "silent": {r.patch: r.silent for r in reports}}, indent=2) + "\n"


def write_report(layout: Layout, reports: list[CarryReport], report_dir: Path | None) -> tuple[Path, Path]:
    directory = report_dir or layout.root / REPORT_DIR
    directory.mkdir(parents=True, exist_ok=True)
    md, js = directory / MARKDOWN, directory / JSON
    write_atomic(md, reports_markdown(reports).encode("utf-8"))
    write_atomic(js, reports_json(reports).encode("utf-8"))
    return md, js


# ---------------------------------------------------------------------------- skip


def skip(layout: Layout, name: str, line_name: str, reason: str) -> Path:
    """Write `skip NAME: REASON` into the line's series, where the patch's entry belongs; returns the series file."""
    reason = " ".join(reason.split())
    if not reason or "#" in reason:
        raise BadInputError("a skip needs a reason in words, without `#` (it would start a comment)")
    problem = control_problem(reason)
    if problem:
        raise BadInputError(f"--reason {problem}: a skip needs a reason in words")
    with repo_lock(layout, "pq skip"):
        checkout = Checkout.load(layout)
        patch = common_patch(checkout.queue, name)
        line = checkout.line(line_name)
        if is_head(layout, line):
            raise BadInputError(f"{line.name} is the head line: patches/series is the common queue itself")
        said = account(checkout.entries(line)).get(patch.name)
        if said is not None:
            raise BadInputError(
                f"line {line.name} already says `{said.text()}` about {patch.name}",
                hint="edit the line's series by hand to change its answer",
            )
        series = checkout.series(line)
        before = insertion_point(checkout, line, series, patch.name)
        new = series.insert(Entry(EntryKind.SKIP, patch.name, reason), before)
        path = line.series_path(layout.root)
        commit(layout, [Output(path.relative_to(layout.root).as_posix(), data=new.dumps().encode("utf-8"))], "pq skip")
        return path
