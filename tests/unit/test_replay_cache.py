"""A tag's replay is kept by the digest of every input (release/queue/replay_cache.py): the same inputs hit,
any changed input misses, a conflict is never kept, and a damaged entry is computed again.

No git here: `compute` stands for the replay (counted), git's version is given, and the entries are real
files in a temporary VLLM_FUSED_MOE_CACHE. That train check, build --all and train add call it with these
inputs: tests/e2e/test_train.py.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import REPO
from helpers.fix import fix_patch
from release.core.hashing import sha256_hex
from release.core.layout import Layout
from release.model.outcome import PatchOutcome, PatchStatus
from release.model.patch import Patch
from release.queue import replay_cache
from release.queue.replay_cache import Replayed, cached_replay, replay_key

ROOT = "vllm/model_executor/layers/fused_moe/prepare_finalize"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VLLM_FUSED_MOE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(replay_cache, "git_version", lambda: "git version 2.99.0 (test)")
    return tmp_path / "cache" / "replays"


@pytest.fixture(scope="module")
def pristine() -> dict[str, bytes]:
    return Layout(REPO).vendor_files()


@pytest.fixture(scope="module")
def patches() -> list[Patch]:
    return [Patch.load(fix_patch())]


def counted(result: Replayed) -> tuple[Callable[[], Replayed], list[int]]:
    calls: list[int] = []

    def compute() -> Replayed:
        calls.append(1)
        return result

    return compute, calls


def applied(files: dict[str, bytes], patches: list[Patch]) -> Replayed:
    return Replayed(
        dict(files), [PatchOutcome(p.name, p.subject, PatchStatus.APPLIES, "applies as it is") for p in patches]
    )


def test_the_same_inputs_are_replayed_once_and_read_back_as_computed(
    pristine: dict[str, bytes], patches: list[Patch]
) -> None:
    result = applied({**pristine, "new.py": b"\x00\xffbytes\n"}, patches)
    compute, calls = counted(result)
    key = replay_key("v0.20.0", ROOT, pristine, None, patches, patches)
    first = cached_replay(key, compute)
    again = cached_replay(replay_key("v0.20.0", ROOT, dict(pristine), None, patches, patches), compute)
    assert calls == [1]
    assert first == again == result


def test_every_input_is_in_the_key(
    pristine: dict[str, bytes], patches: list[Patch], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = sorted(pristine)[0]
    other = Patch(patches[0].name, patches[0].text.replace("Subject:", "Subject: (changed)", 1))
    renamed = Patch("0002-" + patches[0].name[5:], patches[0].text)
    base = {**pristine, name: pristine[name] + b"#\n"}
    made = ("v0.20.0", ROOT, pristine, base, patches, patches)
    keys = {
        "as made": replay_key(*made),
        "tag": replay_key("v0.20.1", *made[1:]),
        "root": replay_key(made[0], "vllm/model_executor/layers/fused_moe", *made[2:]),
        "a pristine file's bytes": replay_key(
            "v0.20.0", ROOT, {**pristine, name: pristine[name] + b"\n"}, base, patches, patches
        ),
        "a pristine file's name": replay_key(
            "v0.20.0", ROOT, {**pristine, "x/" + name: pristine[name]}, base, patches, patches
        ),
        "no base": replay_key(*made[:3], None, *made[4:]),
        "the base's bytes": replay_key(*made[:3], pristine, *made[4:]),
        "remembered": replay_key(*made[:4], [], patches),
        "a patch's text": replay_key(*made[:5], [other]),
        "a patch's name": replay_key(*made[:5], [renamed]),
        "the order": replay_key(*made[:5], [*patches, renamed]) + replay_key(*made[:5], [renamed, *patches]),
    }
    monkeypatch.setattr(replay_cache, "git_version", lambda: "git version 2.98.0 (test)")
    keys["git"] = replay_key(*made)
    monkeypatch.setattr(replay_cache, "tool_digest", lambda: "another tool")
    keys["the tool"] = replay_key(*made)
    assert len(set(keys.values())) == len(keys), keys


def test_a_changed_input_misses_and_is_replayed(pristine: dict[str, bytes], patches: list[Patch]) -> None:
    compute, calls = counted(applied(pristine, patches))
    cached_replay(replay_key("v0.20.0", ROOT, pristine, None, patches, patches), compute)
    edited = Patch(patches[0].name, patches[0].text + "\n")
    cached_replay(replay_key("v0.20.0", ROOT, pristine, None, patches, [edited]), compute)
    assert calls == [1, 1]


def test_a_conflict_is_never_kept(pristine: dict[str, bytes], patches: list[Patch]) -> None:
    conflict = Replayed(pristine, [PatchOutcome(patches[0].name, patches[0].subject, PatchStatus.CONFLICT, "no")])
    compute, calls = counted(conflict)
    key = replay_key("v0.20.0", ROOT, pristine, None, patches, patches)
    assert cached_replay(key, compute) == cached_replay(key, compute) == conflict
    assert calls == [1, 1]


def test_a_damaged_entry_is_computed_again(cache: Path, pristine: dict[str, bytes], patches: list[Patch]) -> None:
    result = applied(pristine, patches)
    compute, calls = counted(result)
    key = replay_key("v0.20.0", ROOT, pristine, None, patches, patches)
    cached_replay(key, compute)
    entry = cache / f"{key}.json"
    text = entry.read_text()
    name = sorted(pristine)[0]
    # A file's bytes replaced (valid base64, not what its sha256 says), then the whole entry cut short.
    held = replay_cache.dumps(key, Replayed({**pristine, name: b"other"}, result.outcomes))
    entry.write_text(held.replace(sha256_hex(b"other"), sha256_hex(pristine[name])))
    assert cached_replay(key, compute) == result
    entry.write_text(text[: len(text) // 2])
    assert cached_replay(key, compute) == result
    assert calls == [1, 1, 1]


def test_the_tool_digest_covers_every_python_file_but_the_wheels_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = tmp_path / "release"
    shutil.copytree(replay_cache.TOOL, tool, ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    monkeypatch.setattr(replay_cache, "TOOL", tool)
    digest = replay_cache.tool_digest.__wrapped__
    before = digest()
    (tool / "overlay" / "runtime" / "vllm_fused_moe" / "_finder.py").write_text("# not replayed\n")
    assert digest() == before
    (tool / "queue" / "upstreamed.py").write_text((tool / "queue" / "upstreamed.py").read_text() + "\n")
    assert digest() != before
