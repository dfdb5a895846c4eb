"""Every command's `--help`, at 80 columns, is the file of its name under tests/unit/snapshots/: a changed
message, option or example is a diff a reviewer reads, as uv and cargo keep theirs.

After a deliberate change, write the files again and review the diff:

    VLLM_FUSED_MOE_UPDATE_SNAPSHOTS=1 python3 -m nox -s unit -- tests/unit/test_help_snapshots.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from release.cli import COMMANDS, build_parser

SNAPSHOTS = Path(__file__).with_name("snapshots")
UPDATE = os.environ.get("VLLM_FUSED_MOE_UPDATE_SNAPSHOTS") == "1"
# The program's own --help, then each command's.
ARGVS = {"release": ["--help"], **{command.name: [command.name, "--help"] for command in COMMANDS}}


def help_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        build_parser(argv).parse_args(argv)
    assert exited.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("name", ARGVS)
def test_help_is_its_snapshot(name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # argparse and release.cli.HelpFormatter wrap at the terminal's width
    text = help_text(ARGVS[name], capsys)
    snapshot = SNAPSHOTS / f"{name}.txt"
    if UPDATE:
        snapshot.write_text(text, encoding="utf-8")
    assert snapshot.is_file(), f"no snapshot {snapshot.name}: run with VLLM_FUSED_MOE_UPDATE_SNAPSHOTS=1 (see above)"
    assert text == snapshot.read_text(encoding="utf-8"), (
        f"{' '.join(ARGVS[name])} changed: VLLM_FUSED_MOE_UPDATE_SNAPSHOTS=1 writes it; review the diff"
    )


def test_every_snapshot_is_a_command() -> None:
    assert sorted(p.stem for p in SNAPSHOTS.glob("*.txt")) == sorted(ARGVS)


@pytest.mark.parametrize("name", ARGVS)
def test_help_fits_80_columns_and_shows_examples(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    text = help_text(ARGVS[name], capsys)
    # argparse leaves one word longer than a line whole (a choices list): nothing else passes 80.
    long = [line for line in text.splitlines() if len(line) > 80 and " " in line.strip()]
    assert not long, long
    if name != "release":
        examples = text.split("\nexamples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        commands = [line for line in examples if not line.startswith("      ")]
        assert all(line.startswith("  python -m release ") and name in line.split() for line in commands), examples
        assert 2 <= len(commands) <= 3 or name == "status", examples
