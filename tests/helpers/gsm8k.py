"""Helpers of the GSM8K smoke tests: a tiny data set, the model-server test double, process checks."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

from helpers import tag_facts

FAKE_SERVER = Path(__file__).with_name("fake_completions_server.py")

TRAIN = [
    {
        "question": f"Train question {n}: what is {n} + {n}?",
        "answer": f"{n} + {n} = <<{n}+{n}={2 * n}>>{2 * n}\n#### {2 * n}",
    }
    for n in range(1, 9)
]
TEST = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples?", "answer": "3 + 4 = 7\n#### 7"},
    {"question": "A car costs $1,200 and a bike $34. Total?", "answer": "1200 + 34 = 1234\n#### 1,234"},
    {"question": "It was 5 degrees and fell by 8. What now?", "answer": "5 - 8 = -3\n#### -3"},
    {"question": "Half of 9?", "answer": "9 / 2 = 4.5\n#### 4.5"},
    {"question": "Ten times ten?", "answer": "10 * 10 = 100\n#### 100"},
]


def write_tiny_data(directory: Path) -> Path:
    directory.mkdir()
    for name, records in (("train.jsonl", TRAIN), ("test.jsonl", TEST)):
        (directory / name).write_text("".join(json.dumps(record) + "\n" for record in records))
    return directory


def fake_server_argv(port: int, *extra: str) -> list[str]:
    return [sys.executable, str(FAKE_SERVER), "--port", str(port), *extra]


def process_gone(pid: int) -> bool:
    """True once pid no longer runs; a zombie (exited, not yet reaped by init) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in {"Z", "X"}


def wait_until(condition: Callable[[], object], timeout_s: float = 10.0, interval_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval_s)
    return bool(condition())


def fake_overlay_version() -> str:
    return f"{tag_facts.head().version}+fm.1"


def make_fake_serving_env(
    root: Path,
    *,
    mode: str,
    fix_active: bool,
    data: Path,
    overlay_version: str | None = fake_overlay_version(),  # None: no overlay installed
    extra_env: dict[str, str] | None = None,
) -> Path:
    """A stand-in for a serving venv: bin/vllm starts the model-server test double, bin/python
    runs this interpreter with a stub `vllm` package on PYTHONPATH (so the environment probe reads
    versions and output_is_reduced() from the stub, not from any real vLLM)."""
    stubs = root / "stubs"
    package = stubs / "vllm" / "model_executor" / "layers" / "fused_moe" / "prepare_finalize"
    package.mkdir(parents=True)
    directory = package
    while directory != stubs:
        (directory / "__init__.py").write_text("")
        directory = directory.parent
    for backend, cls in (
        ("flashinfer_nvlink_two_sided", "FlashInferNVLinkTwoSidedPrepareAndFinalize"),
        ("flashinfer_nvlink_one_sided", "FlashInferNVLinkOneSidedPrepareAndFinalize"),
    ):
        (package / f"{backend}.py").write_text(
            f"class {cls}:\n    def output_is_reduced(self):\n        return {fix_active!r}\n"
        )
    # The stub environment claims the head's vLLM and FlashInfer pin, with or without our overlay.
    head = tag_facts.head()
    dists = {"vllm": head.version, "flashinfer_python": tag_facts.pinned_version(head.flashinfer)}
    if overlay_version:
        dists["vllm_fused_moe"] = overlay_version
    for name, version in dists.items():
        info = stubs / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(stubs))} exec {shlex.quote(sys.executable)} "$@"\n')
    settings = {"FAKE_MODEL_MODE": mode, "FAKE_MODEL_DATA": str(data / "test.jsonl"), **(extra_env or {})}
    vllm = bin_dir / "vllm"
    vllm.write_text(
        f"#!{sys.executable}\nimport os, sys\nos.environ.update({settings!r})\n"
        f"os.execv(sys.executable, [sys.executable, {str(FAKE_SERVER)!r}, *sys.argv[1:]])\n"
    )
    python.chmod(0o755)
    vllm.chmod(0o755)
    return root
