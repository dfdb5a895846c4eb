"""The patch-queue data model: parsing, validation and byte-stable writing."""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import CHECKOUT, REPO, tag_facts
from helpers.fix import fix_patch
from helpers.train import load_train
from release.core.errors import ConfigError, MalformedPatchError, MalformedSeriesError, UnknownTagError
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.model.patch import Patch
from release.model.pin import Pin
from release.model.series import RETIRED_DIR, Entry, EntryKind, Series
from release.model.train import Train

PATCH = fix_patch()


@pytest.mark.rules
def test_every_patch_of_the_queue_carries_its_provenance() -> None:
    """Each patch of the checkout's queue, whatever it holds: a mail the tool loads (the template's answers, its
    trailers, hunks inside the subtree), retired exactly when upstream has it (`Applied-Upstream:`)."""
    layout = Layout(CHECKOUT)
    series = Series.load(layout.series)
    for name, retired in [(n, False) for n in series.names] + [(n, True) for n in series.retired]:
        patch = Patch.load((layout.patches / RETIRED_DIR if retired else layout.patches) / name)
        assert patch.trailers.get("Origin"), f"{name} says nothing of its origin"
        assert patch.purpose.bug or patch.purpose.title, f"{name} fixes no bug and says no downstream reason"
        assert (patch.applied_upstream is not None) == retired, f"{name}: Applied-Upstream: and retired/ disagree"
        assert patch.files and all(f.startswith(UPSTREAM_SUBTREE + "/") for f in patch.files)
        for hunk in patch.hunks:
            assert hunk.removed or hunk.added, f"{name}: a hunk that changes nothing"


def test_with_trailer_adds_then_replaces_without_touching_the_diff() -> None:
    patch = Patch.load(PATCH)
    fixed, later = tag_facts.fixed_upstream(), "v99.0.0"  # the release with the fix, then any other tag
    once = patch.with_trailer("Applied-Upstream", fixed)
    twice = once.with_trailer("Applied-Upstream", later)
    assert once.trailers["Applied-Upstream"] == fixed
    assert twice.trailers["Applied-Upstream"] == later
    assert twice.text.count("Applied-Upstream:") == 1
    assert twice.diff == patch.diff


def test_a_patch_reads_what_the_stages_ask_of_its_trailers_once() -> None:
    """`varies`, `carried_from` and `applied_upstream` are the patch's, not each stage's own parse."""
    patch = Patch.load(PATCH)
    assert (patch.varies, patch.carried_from, patch.applied_upstream) == (None, "", None)
    fixed = tag_facts.fixed_upstream()
    variant = (
        patch.with_trailer("Varies", f"{PATCH.name} (the line's own)")
        .with_trailer("Carried-From", f"{PATCH.name} sha256:0123")
        .with_trailer("Applied-Upstream", f"{fixed.removeprefix('v')}, https://example.invalid/pr")
    )
    assert variant.varies == PATCH.name
    assert variant.carried_from == f"{PATCH.name} sha256:0123"
    assert variant.applied_upstream == fixed  # the tag, canonical, without the DEP-3 URL
    variant.trailers.clear()  # a caller's copy: the mail's own parse is untouched
    assert variant.varies == PATCH.name
    with pytest.raises(UnknownTagError):
        _ = patch.with_trailer("Applied-Upstream", "soon").applied_upstream


def test_corrupt_hunk_is_rejected_with_the_file_named(tmp_path: Path) -> None:
    broken = tmp_path / "0002-broken.patch"
    # The first added line of the patch's first hunk gone: that hunk's counts no longer add up.
    lines = PATCH.read_text().split("\n")
    first_hunk = next(i for i, line in enumerate(lines) if line.startswith("@@ "))
    added = next(i for i in range(first_hunk, len(lines)) if lines[i].startswith("+"))
    broken.write_text("\n".join(lines[:added] + lines[added + 1 :]))
    first_file = Patch.load(PATCH).files[0].rsplit("/", 1)[1]
    with pytest.raises(MalformedPatchError, match=rf"{re.escape(first_file)} is corrupt"):
        Patch.load(broken)


def test_patch_outside_the_subtree_is_rejected(tmp_path: Path) -> None:
    outside = tmp_path / "0002-outside.patch"
    outside.write_text(
        PATCH.read_text().replace(f"{UPSTREAM_SUBTREE}/", "vllm/model_executor/layers/fused_moe/runner/")
    )
    with pytest.raises(MalformedPatchError, match="outside"):
        Patch.load(outside)


def test_series_keeps_comments_and_drops_only_the_named_patch(tmp_path: Path) -> None:
    for name in ("0001-a.patch", "0002-b.patch"):
        (tmp_path / name).write_text("")
    (tmp_path / "series").write_text("# order matters\n0001-a.patch\n\n0002-b.patch  # second\n")
    series = Series.load(tmp_path / "series")
    assert series.names == ["0001-a.patch", "0002-b.patch"]
    assert series.without("0001-a.patch").dumps() == "# order matters\n\n0002-b.patch  # second\n"


@pytest.mark.parametrize(
    "content, message",
    [
        ("0001-missing.patch\n", "not in"),
        ("0001-a.patch\n0001-a.patch\n", "twice"),
        ("../0001-a.patch\n", "not a patch file name"),
    ],
)
def test_bad_series_is_rejected(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "0001-a.patch").write_text("")
    (tmp_path / "series").write_text(content)
    with pytest.raises(MalformedSeriesError, match=message):
        Series.load(tmp_path / "series")


def test_a_line_series_says_take_its_variant_or_skip_and_patches_series_keeps_retired_in_place(tmp_path: Path) -> None:
    common, line = tmp_path / "patches", tmp_path / "patches" / "lines" / "l"
    (common / "retired").mkdir(parents=True)
    line.mkdir(parents=True)
    for path in (common / "0002-b.patch", common / "retired" / "0001-a.patch", line / "0001-a-here.patch"):
        path.write_text("")
    (common / "series").write_text("# the queue\nretired 0001-a.patch\n0002-b.patch  # b\n")
    head = Series.load(common / "series")
    assert (head.names, head.retired) == (["0002-b.patch"], ["0001-a.patch"])
    assert head.unretire("0001-a.patch").dumps() == "# the queue\n0001-a.patch\n0002-b.patch  # b\n"
    assert head.retire("0002-b.patch").dumps() == "# the queue\nretired 0001-a.patch\nretired 0002-b.patch  # b\n"
    (line / "series").write_text("0001-a-here.patch\ntake 0001-a.patch\nskip 0002-b.patch: no such class here # why\n")
    own = Series.load(line / "series", common=common)
    assert [(e.kind, e.name, e.reason) for e in own.entries] == [
        (EntryKind.PATCH, "0001-a-here.patch", ""),
        (EntryKind.TAKE, "0001-a.patch", ""),  # a retired common patch may still be taken
        (EntryKind.SKIP, "0002-b.patch", "no such class here"),
    ]
    assert own.names == ["0001-a-here.patch", "0001-a.patch"]
    inserted = own.insert(Entry(EntryKind.SKIP, "0003-c.patch", "later"), before="0002-b.patch").dumps()
    assert inserted.splitlines()[2] == "skip 0003-c.patch: later"


@pytest.mark.parametrize(
    "content, common, message",
    [
        ("skip 0002-b.patch:\n", True, "gives no reason"),
        ("take 0009-gone.patch\n", True, "takes '0009-gone.patch', which is not in"),
        ("0002-b.patch\n", True, "is a common patch, not a variant of this line"),
        ("take 0002-b.patch\n", False, "`take` is no entry of patches/series"),
        ("retired 0002-b.patch\n", False, "which is not in"),
        ("skip 0002-b.patch: a\n0002-b.patch\n", False, "`skip` is no entry of patches/series"),
    ],
)
def test_a_series_entry_in_the_wrong_file_or_without_its_patch_is_refused(
    tmp_path: Path, content: str, common: bool, message: str
) -> None:
    (tmp_path / "0002-b.patch").write_text("")
    folder = tmp_path / "lines" / "l"
    folder.mkdir(parents=True)
    (folder / "series").write_text(content)
    (tmp_path / "series").write_text(content)
    with pytest.raises(MalformedSeriesError, match=re.escape(message)):
        if common:
            Series.load(folder / "series", common=tmp_path)
        else:
            Series.load(tmp_path / "series")


def test_pin_round_trips_byte_for_byte() -> None:
    path = REPO / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml"
    assert Pin.load(path).dumps() == path.read_text()


# Every character TOML forbids raw in a basic string: the control characters (tab aside), DEL, the
# quote and the backslash. The hand-written writer this replaced escaped only the last two, so a
# `source` or a file name holding any other wrote a file tomllib then refused to read.
AWKWARD = "".join(chr(c) for c in [*range(0x20), 0x7F]) + '"\\ é'


def test_the_pin_writes_any_string_as_toml_that_reads_back_the_same(tmp_path: Path) -> None:
    pin = Pin.load(REPO / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml")
    odd = replace(pin, source=f"dir:{AWKWARD}", files={f"a{AWKWARD}.py": "0" * 64, **pin.files})
    path = tmp_path / "UPSTREAM.toml"
    path.write_text(odd.dumps(), encoding="utf-8")
    assert Pin.load(path) == odd
    assert Pin.load(path).dumps() == odd.dumps()


def test_the_train_writes_any_string_as_toml_that_reads_back_the_same() -> None:
    train = load_train(Layout(REPO))
    entry = replace(train.entries[0], source=f"dir:{AWKWARD}", pristine={f"a{AWKWARD}.py": "0" * 64})
    written = tomllib.loads(Train((entry,)).dumps())
    assert written["release"][0]["source"] == entry.source
    assert written["release"][0]["pristine"] == entry.pristine
    # The file's own comments survive every write: tomli-w writes none, they are a fixed header.
    assert Train((entry,)).dumps().startswith("# The release train: every vLLM release we ship an overlay for")


def test_pin_with_a_bad_digest_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "UPSTREAM.toml"
    path.write_text((REPO / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml").read_text().replace('"2800', '"zz00', 1))
    with pytest.raises(ConfigError, match="sha256"):
        Pin.load(path)


def test_a_patch_mails_headers_are_read_as_git_am_reads_them() -> None:
    """Folded lines joined, RFC 2047 words decoded: `git format-patch` encodes a non-ASCII subject or
    author so. The regexes this replaced returned `=?UTF-8?q?...?=` as the subject, which then matched
    no commit's subject in `pq export` (git log gives it decoded)."""
    plain = Patch(
        "0003-plain.patch",
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Seed maintainers\n <maintainers@users.noreply.example>\n"
        "Subject: fused_moe: a plain subject\n\nWhy: because.\n",
    )
    assert plain.subject == "fused_moe: a plain subject"
    assert plain.author == "Seed maintainers <maintainers@users.noreply.example>"  # a folded From: joined
    mail = (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: =?UTF-8?q?J=C3=B6rg=20M=C3=BCller?= <jm@example.org>\n"
        "Date: Thu, 3 Dec 2026 00:00:00 +0000\n"
        "Subject: =?UTF-8?q?fused=5Fmoe:=20caf=C3=A9=20combine=20output=20is=20alr?=\n"
        " =?UTF-8?q?eady=20reduced?=\n"
        "\n"
        "Why: because.\n"
    )
    odd = Patch("0002-x.patch", mail)
    assert odd.subject == "fused_moe: café combine output is already reduced"
    assert odd.author == "Jörg Müller <jm@example.org>"
