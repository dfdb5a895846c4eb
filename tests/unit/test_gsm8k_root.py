"""`python -m release --root DIR gsm8k`: the defaults that are places in a checkout are DIR's.

gsm8k used to find the repository from its own file, so --root changed nothing there: the index it
installs from, its venvs, its reports, the GSM8K copy beside the checkout and the vLLM it serves
were the tool's checkout's whatever --root said.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from helpers.failure import failed
from release.cli import build_parser, main
from release.core.errors import EXIT_BAD_INPUT, BadInputError
from release.core.layout import Layout
from release.gsm8k.cli import config_from_args, with_defaults
from release.model.pin import Pin

ARGS = ("gsm8k", "--model", "m", "--backend", "flashinfer_all2allv")


def test_the_default_index_is_the_one_of_the_root_given(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Refused before anything runs: the index --root's checkout has holds no simple/ (no GPU, no process).
    assert main(["--root", str(project), *ARGS]) == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err)
    assert error.reference == BadInputError.reference
    assert error.message == f"--index {project.resolve() / 'index'} has no simple/ directory"


def test_every_default_place_is_in_the_root_given(project: Path) -> None:
    root = project.resolve()
    pin = root / "vendor" / "vllm_fused_moe" / "UPSTREAM.toml"
    pin.write_text(pin.read_text().replace(Pin.load(pin).version, "0.0.1", 1))  # a pin only this checkout has
    args = build_parser(list(ARGS)).parse_args(["--root", str(root), *ARGS])
    started = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    args = with_defaults(args, Layout(root), started)
    config = config_from_args(args, args.report, Layout(root))
    assert (config.index_dir, config.work_dir) == (root / "index", root / ".work" / "gsm8k")
    assert config.report_dir == root / "reports" / "gsm8k" / "20260102T030405Z-flashinfer_all2allv"
    assert config.vllm_version == "0.0.1"
    assert config.data_searched == root.parent / "shared" / "data" / "gsm8k"
