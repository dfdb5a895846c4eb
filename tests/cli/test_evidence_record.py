"""Hostile INDEX_DIR/evidence/*.json beside held wheels (issue 45), read by release/evidence/record.py.

Each file is refused with a named problem, never a traceback: 300,000 levels of `[` or `{`, `{"vllm": [1]}`,
a `wheel` that is a string, a FIFO; evidence of another wheel (by name or by sha256) beside a held wheel is
no evidence of it. `publish` notes each, and a publish of the held wheel writes its own evidence over it.
Real files, a real FIFO, real publishes of a synthetic wheel (no bug to prove: no test runs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import REPO
from helpers.synthetic import demo_wheel
from release.cli import main
from release.core.errors import EXIT_OK
from release.core.hashing import file_sha256
from release.evidence.gather import Evidence
from release.evidence.record import MAX_DEPTH, RecordError, bound_record, has_record, held_records
from release.overlay import publish as publish_module
from release.overlay.build import PROJECT
from release.overlay.index import publish
from release.overlay.publish import held_evidence
from release.overlay.wheel import WheelReads

VERSION = "1.2.3+fm.2"


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """An index holding one synthetic wheel (the index stage alone: publish refuses a demo wheel, which is no
    build of the checkout) and the evidence a publish writes for a wheel with no bug to prove."""
    folder = tmp_path / "index"
    wheel = demo_wheel(tmp_path / "dist", VERSION)
    publish([wheel], folder, project=PROJECT)
    (folder / "evidence").mkdir()
    (folder / "evidence" / f"{wheel.name}.json").write_bytes(Evidence(wheel.name, _record(wheel)).text())
    return folder


def _held(index: Path) -> tuple[Path, Path]:
    [wheel] = (index / "simple" / "vllm-fused-moe").glob("*.whl")
    return wheel, index / "evidence" / f"{wheel.name}.json"


def test_the_evidence_publish_wrote_is_bound_to_its_wheel(index: Path) -> None:
    wheel, path = _held(index)
    record = bound_record(path, wheel.name, file_sha256(wheel))
    assert (record.wheel, record.sha256, record.vllm_version) == (wheel.name, file_sha256(wheel), "1.2.3")
    assert held_records(index, lambda name: file_sha256(wheel.parent / name)) == ([record], [])


def _edited(path: Path, **fields: object) -> bytes:
    record = json.loads(path.read_text(encoding="utf-8"))
    record.update(fields)
    return json.dumps(record).encode()


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("deep array", "nested too deeply to read"),
        ("deep object", "nested too deeply to read"),
        ("nine levels", f"nests deeper than the {MAX_DEPTH} levels"),
        ("vllm a list", "no `wheel` and `vllm` objects"),
        ("wheel a string", "no `wheel` and `vllm` objects"),
        ("a bug's name a list", "its bug is no string"),
        ("fifo", "is a FIFO, not a regular file"),
        ("another wheel's", "is the evidence of 'vllm_fused_moe-1.2.3+fm.1-py3-none-any.whl'"),
        ("another build's", "is the evidence of another build of"),
    ],
)
def test_hostile_evidence_beside_a_held_wheel_is_a_named_problem(index: Path, case: str, said: str) -> None:
    wheel, path = _held(index)
    makers: dict[str, Callable[[], bytes | None]] = {
        "deep array": lambda: b"[" * 300_000,
        "deep object": lambda: b'{"a":' * 150_000,  # 750 kB: under the bound, so the parser meets it
        "nine levels": lambda: _edited(path, extra=[[[[[[[[[]]]]]]]]]),
        "vllm a list": lambda: _edited(path, vllm=[1]),
        "wheel a string": lambda: _edited(path, wheel=wheel.name),
        "a bug's name a list": lambda: _edited(path, bugs=[{"bug": ["x"], "verdict": "fixed"}]),
        "another wheel's": lambda: _edited(
            path, wheel={"name": wheel.name.replace("fm.2", "fm.1"), "sha256": "a" * 64}
        ),
        "another build's": lambda: _edited(path, wheel={"name": wheel.name, "sha256": "a" * 64}),
        "fifo": lambda: None,
    }
    text = makers[case]()
    path.unlink()
    if text is None:
        os.mkfifo(path)
    else:
        path.write_bytes(text)
    with pytest.raises(RecordError) as refused:
        bound_record(path, wheel.name, file_sha256(wheel))
    assert said in str(refused.value), refused.value
    assert held_evidence(index, WheelReads()) == [] and not has_record(index, wheel.name, file_sha256(wheel))


def _record(wheel: Path) -> dict[str, object]:
    """What a publish writes for a wheel with no bug to prove."""
    version = VERSION.split("+")[0]
    return {
        "schema": 1,
        "wheel": {"name": wheel.name, "sha256": file_sha256(wheel)},
        "vllm": {"tag": f"v{version}", "version": version},
        "bugs": [],
    }


def test_publish_notes_evidence_of_another_wheel_and_writes_the_held_wheels_own(
    index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel, path = _held(index)
    own = path.read_bytes()
    path.write_bytes(_edited(path, wheel={"name": wheel.name, "sha256": "a" * 64}))
    # Doubles of the proof (the rebuild and the runs, tests/e2e's): a demo wheel is no build of the checkout. What
    # this test holds is publish's reading of the index's evidence and its repair, which stay real.
    monkeypatch.setattr(publish_module, "origins", lambda layout, wheels, allow_dirty: [])
    monkeypatch.setattr(
        publish_module,
        "prove",
        lambda checkout, wheels, options, held, stack, workers=None: [
            Evidence(w.name, _record(w.path)) for w in wheels
        ],
    )
    capsys.readouterr()
    again = main(["--root", str(REPO), "publish", str(demo_wheel(tmp_path / "again", VERSION)), str(index)])
    err = capsys.readouterr().err
    assert again == EXIT_OK and "is the evidence of another build of" in err and "it proves nothing" in err, err
    assert json.loads(path.read_bytes()) == json.loads(own) and has_record(index, wheel.name, file_sha256(wheel))
