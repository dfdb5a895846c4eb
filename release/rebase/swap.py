"""Put a finished rebase in place: vendor/ subtree, UPSTREAM.toml and patches/ swap together.

Everything is written to a staging directory first; the swap is renames, undone if
any of them fails, so a rebase leaves either the old state or the new one.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from release.core.layout import Layout, write_files


@dataclass
class Outputs:
    vendor: dict[str, bytes]
    refreshed: dict[str, str]  # patch name -> text
    retired: dict[str, str]  # patch name -> text with Applied-Upstream set
    series: str
    pin: str
    train: str | None = None  # patches/train.toml with the head's entry moved; None: no train here


def install(layout: Layout, outputs: Outputs) -> None:
    stage = layout.work / f"stage-{uuid.uuid4().hex[:8]}"
    try:
        new_subtree = stage / "subtree"
        write_files(new_subtree, outputs.vendor)
        new_patches = stage / "patches"
        shutil.copytree(layout.patches, new_patches)
        for name, text in outputs.refreshed.items():
            (new_patches / name).write_text(text, encoding="utf-8")
        for name, text in outputs.retired.items():
            (new_patches / "retired").mkdir(exist_ok=True)
            (new_patches / "retired" / name).write_text(text, encoding="utf-8")
            (new_patches / name).unlink()
        (new_patches / "series").write_text(outputs.series, encoding="utf-8")
        if outputs.train is not None:
            # train.toml lives in patches/, so it moves in the same rename as the series.
            (new_patches / "train.toml").write_text(outputs.train, encoding="utf-8")
        new_pin = stage / "UPSTREAM.toml"
        new_pin.write_text(outputs.pin, encoding="utf-8")
        _swap(
            layout,
            [(new_subtree, layout.subtree), (new_patches, layout.patches), (new_pin, layout.upstream_toml)],
            stage,
        )
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _swap(layout: Layout, pairs: list[tuple[Path, Path]], stage: Path) -> None:
    done: list[tuple[Path, Path]] = []  # (target, backup)
    try:
        for new, target in pairs:
            backup = stage / f"old-{target.name}"
            target.replace(backup)
            done.append((target, backup))
            new.replace(target)
    except BaseException:
        for target, backup in reversed(done):
            if target.exists():
                shutil.rmtree(target) if target.is_dir() else target.unlink()
            backup.replace(target)
        raise
