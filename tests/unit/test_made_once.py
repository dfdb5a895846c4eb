"""What several test files of one run share across xdist's workers is made once (tests/helpers/shared.py).

The workers are processes; here the askers are threads of this one, behind the same file lock.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers.shared import made_once, run_temp


def test_every_asker_gets_the_one_directory_the_first_made(tmp_path: Path) -> None:
    made: list[Path] = []

    def make(directory: Path) -> None:
        made.append(directory)
        (directory / "wheel").write_text("built", encoding="utf-8")

    with ThreadPoolExecutor(4) as pool:
        got = set(pool.map(lambda _: made_once(tmp_path, "train-wheels", make), range(8)))
    assert len(made) == 1 and got == {tmp_path / "made-once" / "train-wheels"}
    assert (tmp_path / "made-once" / "train-wheels" / "wheel").read_text(encoding="utf-8") == "built"


def test_a_failed_make_leaves_nothing_taken_for_done_and_the_next_asker_makes_it(tmp_path: Path) -> None:
    def fails(directory: Path) -> None:
        (directory / "half").write_text("", encoding="utf-8")
        raise RuntimeError("the build failed")

    with pytest.raises(RuntimeError):
        made_once(tmp_path, "train-wheels", fails)
    assert not (tmp_path / "made-once" / "train-wheels").exists()
    done = made_once(tmp_path, "train-wheels", lambda directory: (directory / "whole").touch())
    assert sorted(p.name for p in done.iterdir()) == ["whole"]


def test_the_run_temp_is_shared_by_the_workers_of_one_run(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")  # a worker's basetemp is popen-gw1 in the run's
    assert run_temp(tmp_path_factory) == base.parent
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert run_temp(tmp_path_factory) == base
