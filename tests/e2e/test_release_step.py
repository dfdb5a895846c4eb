"""docs/maintainers.md's release step, as a new maintainer runs it, on a fresh clone (issue 44).

`nox -s build` for one tag of every release line (the doc's per-tag form: "a new tag in the train", `--tag
... --out DIR`), then `nox -s publish -- DIR index` with relative paths, from a fresh `git clone` of this
repository, with an empty evidence cache and no `--python`: the tool makes each line's proving
environment and proves each wheel there, into an index that already holds every other wheel of the
train. The tags are read from the train, one per line (the newest), never written here.

The one e2e test of the release step: the release wheels, the proving environments and compiled modules
come from the user's cache (linked), the evidence cache starts empty, so every run is made (8 runs, each
forked from a server per environment).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from helpers.train import load_train
from release.core.layout import Layout
from release.overlay.build import PROJECT
from release.overlay.index import publish
from release.pristine.wheel import cache_dir

pytestmark = [pytest.mark.network, pytest.mark.slow]


def run(words: list[str], cwd: Path, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def test_the_documented_release_step_publishes_one_tag_of_every_line_from_a_fresh_clone(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    cloned = run(["git", "clone", "-q", str(REPO), str(clone)], tmp_path, dict(os.environ))
    assert cloned.returncode == 0, cloned.stderr
    train = load_train(Layout(clone))
    newest = {entry.line: entry for entry in train.entries if entry.bugs}
    chosen = sorted(newest.values(), key=lambda entry: entry.tag)
    assert len(chosen) >= 2, "the train has one release line only"

    # An empty evidence cache; the release wheels, proving environments and compiled modules linked.
    cache = tmp_path / "cache"
    (cache / "wheels").mkdir(parents=True)
    for version in cache_dir().iterdir():
        if version.is_dir():
            (cache / "wheels" / version.name).symlink_to(version, target_is_directory=True)
    for shared in ("envs", "pycache"):
        if (cache_dir().parent / shared).is_dir():
            (cache / shared).symlink_to(cache_dir().parent / shared, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["VLLM_FUSED_MOE_CACHE"] = str(cache)

    # The index already holds the train: every other tag's wheel, as an earlier release left it.
    built = run(
        [sys.executable, "-m", "release", "--root", str(clone), "build", "--all", "--out", str(tmp_path / "train")],
        REPO,
        env,
    )
    assert built.returncode == 0, built.stderr
    others = [
        w for w in sorted((tmp_path / "train").glob("*.whl")) if not any(f"-{e.tag[1:]}+" in w.name for e in chosen)
    ]
    assert len(others) == len(train.entries) - len(chosen)
    publish(others, clone / "index", project=PROJECT)

    nox = [sys.executable, "-m", "nox", "--no-color"]
    tags = [word for entry in chosen for word in ("--tag", entry.tag)]
    built = run([*nox, "-s", "build", "--", *tags, "--out", "dist-new"], clone, env)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    published = run([*nox, "-s", "publish", "--", "dist-new", "index"], clone, env)
    said = published.stdout + published.stderr
    assert published.returncode == 0, said[-6000:]

    for entry in chosen:
        [wheel] = (clone / "dist-new").glob(f"*-{entry.tag[1:]}+*.whl")
        assert f"published {wheel.name}" in said
        evidence = json.loads((clone / "index" / "evidence" / f"{wheel.name}.json").read_text())
        assert evidence["line"] == entry.line and evidence["python"].startswith(str(cache)), evidence
        assert {b["bug"]: b["verdict"] for b in evidence["bugs"]} == dict.fromkeys(entry.bugs, "fixed")
        assert f"evidence: vLLM {entry.tag} " in said  # a line per run, with its time
        pinned = (clone / "index" / "requirements" / f"vllm-{entry.tag[1:]}.txt").read_text()
        assert wheel.name.split("-")[1] in pinned
    assert len(list((clone / "index" / "requirements").glob("vllm-*.txt"))) == len(train.entries)
