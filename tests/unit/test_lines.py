"""Release lines (patches/lines.toml): a variant patch names the common patch it varies and stays in
its line's modules, a line's roots and overlay targets, and what a malformed line file says.

What each line's series does to every train tag's real files: tests/e2e/test_lines.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import CHECKOUT, REPO
from release.core.errors import ConfigError, MalformedPatchError, MalformedSeriesError
from release.core.layout import Layout
from release.model.lines import read_lines
from release.model.patch import Patch
from release.queue.load import line_patches


@pytest.mark.rules
def test_a_variant_names_the_common_patch_it_varies_and_answers_the_four_questions() -> None:
    layout = Layout(CHECKOUT)
    common = {p.name for p in (Patch.load(path) for path in layout.patches.glob("*.patch"))}
    for line in read_lines(layout.lines).lines:
        for patch in line_patches(layout, line):
            if patch.name in common and (layout.patches / patch.name).read_text() == patch.text:
                continue  # a common patch taken as it is
            assert patch.trailers.get("Varies") in common, f"{line.name}: {patch.name} varies no common patch"
            for question in ("Why:", "How:", "Related PR:", "Future plan:"):
                assert question in patch.message, f"{line.name}: {patch.name} does not say {question}"
            for path in patch.files:
                assert any(path == m or (m.endswith("/") and path.startswith(m)) for m in line.modules)


def test_a_variant_outside_its_line_or_a_series_naming_nothing_is_refused(tmp_path: Path) -> None:
    layout = Layout(REPO)
    lines = read_lines(layout.lines)
    cutlass, a2a = lines.get("flashinfer_cutlass"), lines.get("flashinfer_a2a")
    variant = next(cutlass.patch_dir(layout.root).glob("*.patch"))
    with pytest.raises(MalformedPatchError, match="outside"):
        Patch.load(variant, a2a.prefixes)
    from release.model.series import Series

    (tmp_path / "series").write_text("0009-nothing.patch\n")
    with pytest.raises(MalformedSeriesError, match=r"0009-nothing\.patch"):
        Series.load(tmp_path / "series", common=layout.patches)


def test_line_roots_and_overlay_targets_never_name_a_parent_package() -> None:
    lines = read_lines(Layout(REPO).lines)
    head = lines.get("prepare_finalize")
    assert head.root == "vllm/model_executor/layers/fused_moe/prepare_finalize"
    assert head.targets("prepare_finalize") == {
        "vllm.model_executor.layers.fused_moe.prepare_finalize": "prepare_finalize/"
    }
    cutlass = lines.get("flashinfer_cutlass")
    assert cutlass.targets(cutlass.overlay_dir) == {
        "vllm.model_executor.layers.fused_moe.flashinfer_cutlass_prepare_finalize": (
            "fused_moe/flashinfer_cutlass_prepare_finalize.py"
        )
    }
    for line in lines.lines:
        assert "vllm.model_executor.layers.fused_moe" not in line.targets(line.overlay_dir)


def test_backends_of_a_line_must_be_a_list_of_names(tmp_path: Path) -> None:
    text = Layout(REPO).lines.read_text(encoding="utf-8")
    broken = tmp_path / "lines.toml"
    broken.write_text(text.replace('backends = ["flashinfer_all2allv"]', 'backends = "flashinfer_all2allv"', 1))
    assert broken.read_text() != text
    with pytest.raises(ConfigError, match="backends"):
        read_lines(broken)
