"""The gates (`check`, `train add`, `build`, `publish`) as processes, offline: what a train tag must carry is a
fact of the tag, never of how much the last scan read; a line's variant carried from an older version of its
common patch is stale and never ships.

Every refusal here comes before any release is read: the tests need neither the network nor the wheel cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from helpers import run_release, snapshot
from helpers.failure import failed
from helpers.synthetic import SHAPE_CHECK_PATCH, add_shape_check, demo_wheel
from helpers.train import load_train
from release.core.errors import MissingFixError, StaleVariantError
from release.core.layout import Layout
from release.core.versions import version_of_tag
from release.model.lines import HEAD_LINE, read_lines
from release.model.patch import CARRIED_FROM, Patch
from release.model.series import Entry, EntryKind, Series
from release.queue.gates import fingerprint
from release.queue.load import is_head, line_series
from release.queue.snapshot import Checkout
from release.scan.document import build_document, dumps, load_document
from release.scan.run import ReleaseResult, ScanOptions, ScanResult, bug_map, bug_statuses, scan_patches


@dataclass(frozen=True)
class OlderLine:
    """An older release line of the train with a variant of a common patch that fixes a bug, and its oldest tag."""

    name: str
    tag: str
    variant: str  # the variant's file name in patches/lines/<name>/
    common: str  # the common patch it varies
    bug: str  # the bug the common patch fixes

    def series(self, layout: Layout) -> Path:
        return layout.root / "patches" / "lines" / self.name / "series"

    def variant_path(self, layout: Layout) -> Path:
        return layout.root / "patches" / "lines" / self.name / self.variant


def older_line(layout: Layout) -> OlderLine:
    train = load_train(layout)
    for line in read_lines(layout.lines).lines:
        tags = [e.tag for e in train.entries if e.line == line.name]
        if is_head(layout, line) or not tags:
            continue
        for entry in line_series(layout, line).entries:
            path = line.patch_dir(layout.root) / entry.name
            if entry.kind == EntryKind.PATCH and (common := Patch(entry.name, path.read_text()).varies):
                bug = Patch.load(layout.patches / common).purpose.bug
                if bug:
                    return OlderLine(line.name, tags[0], entry.name, common, bug)
    raise AssertionError("the train has no older line with a variant of a bug's patch")


def overlay_wheel(directory: Path, tag: str, level: int, patches: list[dict[str, object]]) -> Path:
    """A wheel of ours for `tag` as `build` describes it in _build_info.json: the patches it carries."""
    version = version_of_tag(tag)
    return demo_wheel(
        directory, f"{version}+fm.{level}", {"vllm_tag": tag, "vllm_version": version, "patches": patches}
    )


def partial_scan(layout: Layout, since: Version) -> list[str]:
    """What `scan --since SINCE` writes after a patch joined the series: the releases in the range are classified
    for the new series, and the ones before it, classified for the old one, are dropped. Returns those."""
    document = load_document(layout.affected_json)
    assert document is not None
    _queue, patches = scan_patches(Checkout.load(layout))
    bug_of = bug_map(patches)
    results = []
    for version, entry in document["releases"].items():
        if Version(version) >= since:
            states = {**entry["patches"], SHAPE_CHECK_PATCH: "absent"}
            results.append(
                ReleaseResult(
                    version, entry["line"], states, entry["wheel"], entry["wheel_sha256"], entry["flashinfer"]
                )
            )
            results[-1].bugs = bug_statuses(states, bug_of)
    train = {Version(version_of_tag(tag)) for tag in load_train(layout).tags}
    result = ScanResult(results, {}, patches, 0.0, read_lines(layout.lines))
    partial, dropped = build_document(result, ScanOptions(layout, since=since), document, train)
    layout.affected_json.write_text(dumps(partial))
    return dropped


def test_a_partial_scan_leaves_every_gate_holding_a_tag_to_the_bugs_it_has(project: Path, tmp_path: Path) -> None:
    """The issue's case: after a partial scan the scan data no longer lists the older tags; a line's series then
    skips the bug's patch by mistake. Each gate still refuses, naming the bug, the tag and the line."""
    layout = Layout(project)
    line = older_line(layout)
    add_shape_check(project, lines_skip=True)
    document = load_document(layout.affected_json)
    assert document is not None
    since = min(Version(v) for v, e in document["releases"].items() if e["line"] == HEAD_LINE)
    dropped = partial_scan(layout, since)  # as `scan --since <the head line's first release>`
    assert version_of_tag(line.tag) in dropped  # the scan data no longer says anything about the tag
    series = Series.load(line.series(layout), common=layout.patches)
    skip = Entry(EntryKind.SKIP, line.common, "a maintainer's mistake")
    line.series(layout).write_text(series.replace(line.variant, skip).dumps())
    before = snapshot(project)
    said = f"vLLM {line.tag} (line {line.name}) is affected by {line.bug}"

    checked = run_release(project, "check")
    assert checked.returncode == 2, checked.stdout + checked.stderr
    error = failed(checked)
    assert error.reference == MissingFixError.reference and error.message.startswith(f"check: {said}"), error
    assert "(patches/train.toml)" in error.message

    added = run_release(project, "train", "add", "--all")
    assert added.returncode == 2, added.stdout + added.stderr
    error = failed(added)
    assert error.reference == MissingFixError.reference, error
    assert error.message.startswith(f"not adding {line.tag}: {said}"), error

    built = run_release(project, "build", "--tag", line.tag, "--out", str(tmp_path / "dist"))
    assert built.returncode == 2, built.stdout + built.stderr
    error = failed(built)
    assert error.reference == MissingFixError.reference, error
    assert error.message.startswith(f"not building {line.tag}: {said}"), error
    assert not (tmp_path / "dist").exists()

    shape: dict[str, object] = {"name": SHAPE_CHECK_PATCH, "bug": "", "trailers": {}}
    wheel = overlay_wheel(tmp_path / "blind", line.tag, 2, [shape])
    published = run_release(project, "publish", str(wheel), str(tmp_path / "index"))
    assert published.returncode == 2, published.stdout + published.stderr
    error = failed(published)
    assert error.reference == MissingFixError.reference and f"{wheel.name}: {said}" in error.message, error
    assert not (tmp_path / "index").exists()
    assert snapshot(project) == before


def test_a_variant_carried_from_an_older_version_of_its_patch_is_stale_and_never_ships(
    project: Path, tmp_path: Path
) -> None:
    """Change the common patch after `pq carry`, forget to carry it again: `check` says so with the `pq carry` to
    run (exit 2), and `build` and `publish` refuse the old variant; a hand-made variant is named once, unchecked."""
    layout = Layout(project)
    line = older_line(layout)
    variant = line.variant_path(layout)
    common = Patch.load(layout.patches / line.common)
    carried = Patch(variant.name, variant.read_text()).with_trailer(CARRIED_FROM, fingerprint(common))
    variant.write_text(carried.text)

    fresh = run_release(project, "check")
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    notes = [n for n in fresh.stderr.splitlines() if "not checked" in n]
    hand_made = [p for p in layout.patches.glob("lines/*/*.patch") if CARRIED_FROM + ":" not in p.read_text()]
    assert len(notes) == len(hand_made) and hand_made, fresh.stderr  # each once
    assert all(f"patches/lines/{p.parent.name}/{p.name}" in fresh.stderr for p in hand_made)
    assert f"patches/lines/{line.name}/{line.variant}" not in "\n".join(notes)  # carried: checked

    # The common patch changes (its message here, so vendor/ stays pristine + series); the variant is not carried again.
    changed = common.text.replace("\nHow: ", "\nHow: (reworded) ", 1)
    assert changed != common.text
    (layout.patches / line.common).write_text(changed)
    before = snapshot(project)

    checked = run_release(project, "check")
    assert checked.returncode == 2, checked.stdout + checked.stderr
    error = failed(checked)
    where = f"patches/lines/{line.name}/{line.variant}"
    assert error.reference == StaleVariantError.reference, error
    assert f"{where} (line {line.name}) is stale: carried from {fingerprint(common)}" in error.message, error
    assert f"`python -m release pq carry {line.common}`" in error.hint, error

    built = run_release(project, "build", "--tag", line.tag, "--out", str(tmp_path / "dist"))
    assert built.returncode == 2, built.stdout + built.stderr
    error = failed(built)
    assert error.reference == StaleVariantError.reference and f"{where} (line {line.name})" in error.message, error
    assert not (tmp_path / "dist").exists()

    shipped: dict[str, object] = {"name": line.variant, "bug": line.bug, "trailers": carried.trailers}
    wheel = overlay_wheel(tmp_path / "old", line.tag, 2, [shipped])
    published = run_release(project, "publish", str(wheel), str(tmp_path / "index"))
    assert published.returncode == 2, published.stdout + published.stderr
    error = failed(published)
    assert error.reference == StaleVariantError.reference and f"{wheel.name}: {line.variant}" in error.message
    assert not (tmp_path / "index").exists()
    assert snapshot(project) == before
