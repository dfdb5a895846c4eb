"""The upstream report's measurement: `lm_eval --model local-completions ... --tasks gsm8k --num_fewshot 5`.

lm-eval downloads openai/gsm8k from the Hugging Face hub, so this path needs that network
(or a warm HF cache); the builtin scorer (prompts/extract/scoring) is the offline twin.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from release.core.errors import LmEvalError
from release.core.parse import parse_json
from release.gsm8k.scoring import METRICS, MetricResult

MAX_LENGTH = 8192  # from the upstream report's --model_args


def lm_eval_command() -> list[str] | None:
    """How to start lm-eval here, or None when it is not installed."""
    if importlib.util.find_spec("lm_eval") is not None:
        return [sys.executable, "-m", "lm_eval"]
    executable = shutil.which("lm_eval")
    return [executable] if executable else None


def build_lm_eval_argv(
    command: list[str],
    *,
    base_url: str,
    model: str,
    concurrency: int,
    output_dir: Path,
    limit: int | None = None,
) -> list[str]:
    model_args = ",".join(
        [
            f"model={model}",
            f"base_url={base_url.rstrip('/')}/v1/completions",
            f"max_length={MAX_LENGTH}",
            "tokenized_requests=False",
            "tokenizer_backend=None",
            f"num_concurrent={concurrency}",
        ]
    )
    argv = [
        *command,
        "--model",
        "local-completions",
        "--model_args",
        model_args,
        "--tasks",
        "gsm8k",
        "--num_fewshot",
        "5",
        "--output_path",
        str(output_dir),
    ]
    if limit is not None:
        argv += ["--limit", str(limit)]
    return argv


def _as_float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def parse_results(output_dir: Path) -> dict[str, MetricResult]:
    """Read the newest results_*.json lm-eval wrote under output_dir (it nests a model-named folder)."""
    candidates = sorted(output_dir.rglob("results_*.json"), key=lambda path: path.stat().st_mtime)
    if not candidates:
        raise LmEvalError(f"lm-eval wrote no results_*.json under {output_dir}")
    document = parse_json(candidates[-1].read_text(encoding="utf-8"), where=str(candidates[-1]), error=LmEvalError)
    try:
        task = document["results"]["gsm8k"]
    except (KeyError, TypeError) as err:
        raise LmEvalError(f"{candidates[-1]} has no results.gsm8k") from err
    samples = document.get("n-samples", {}).get("gsm8k", {})
    count = int(samples.get("effective", samples.get("original", 0)))
    parsed: dict[str, MetricResult] = {}
    for name in METRICS:
        value = _as_float(task.get(f"exact_match,{name}"))
        if value is None:
            raise LmEvalError(f"{candidates[-1]} has no exact_match,{name}")
        parsed[name] = MetricResult(value, _as_float(task.get(f"exact_match_stderr,{name}")), count)
    return parsed


def run_lm_eval(
    argv: list[str],
    *,
    log_path: Path,
    output_dir: Path,
    liveness_check: Callable[[], None] | None = None,
    timeout_s: float = 6 * 3600.0,
) -> dict[str, MetricResult]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        # lm-eval's progress bars go to stderr (ours); its tables and logs to the log file.
        process = subprocess.Popen(argv, stdout=log, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        try:
            while process.poll() is None:
                if liveness_check is not None:
                    liveness_check()
                if time.monotonic() > deadline:
                    raise LmEvalError(f"lm-eval ran past {timeout_s:g} s")
                time.sleep(1.0)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    if process.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-25:])
        raise LmEvalError(f"lm-eval exited {process.returncode}; log tail:\n{tail}")
    return parse_results(output_dir)
