"""One smoke run: serving env -> `vllm serve` -> GSM8K 5-shot -> scores; and the gate over runs."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from release.core.errors import DataNotFoundError, LmEvalError
from release.gsm8k import dataset, lm_eval_runner, prompts, scoring, venvs
from release.gsm8k.client import CompletionsClient, CompletionSettings
from release.gsm8k.progress import ProgressPrinter, note
from release.gsm8k.results import RunResult, SmokeReport
from release.gsm8k.server import ManagedServer, build_vllm_serve_argv, free_port

SCORERS: tuple[str, ...] = ("auto", "builtin", "lm-eval")


@dataclass(frozen=True)
class SmokeConfig:
    model: str
    backend: str
    tensor_parallel_size: int
    data_parallel_size: int
    enable_expert_parallel: bool
    serve_extra_args: tuple[str, ...]
    limit: int | None
    threshold: float
    gate_metric: str
    scorer: str
    data_dir: Path | None  # None: the default copy was not found
    concurrency: int
    max_tokens: int
    request_timeout_s: float
    health_timeout_s: float
    host: str
    port: int  # 0: pick a free one per run
    report_dir: Path
    work_dir: Path
    index_dir: Path | None
    overlay_version: str | None
    vllm_version: str
    vllm_index_args: tuple[str, ...]
    fixed_venv: Path | None  # use as is instead of installing
    upstream_venv: Path | None
    server_env: tuple[tuple[str, str], ...] = ()  # set for `vllm serve` on top of ours
    data_searched: Path | None = None  # where the GSM8K copy was looked for (None: the default place)


def serve_argv(config: SmokeConfig, vllm_executable: str | Path, port: int) -> list[str]:
    """The `vllm serve` command line of a run (tests/gsm8k/test_serve_flags.py parses it with each train tag's vLLM)."""
    return build_vllm_serve_argv(
        vllm_executable,
        config.model,
        config.backend,
        tensor_parallel_size=config.tensor_parallel_size,
        data_parallel_size=config.data_parallel_size,
        port=port,
        host=config.host,
        enable_expert_parallel=config.enable_expert_parallel,
        extra_args=config.serve_extra_args,
    )


def label_for(with_patches: bool) -> str:
    return "with-fix" if with_patches else "without-fix"


def prepare_env(config: SmokeConfig, with_patches: bool) -> venvs.ServingEnv:
    given = config.fixed_venv if with_patches else config.upstream_venv
    if given is not None:
        note(f"{label_for(with_patches)}: using the environment {given} as it is")
        return venvs.probe(given, with_patches)
    venv = config.work_dir / f"venv-{label_for(with_patches)}"
    plan = venvs.InstallPlan(
        venv=venv,
        with_patches=with_patches,
        index_dir=config.index_dir,
        vllm_version=config.vllm_version,
        overlay_version=config.overlay_version,
        vllm_index_args=config.vllm_index_args,
    )
    log = config.report_dir / f"install-{label_for(with_patches)}.log"
    note(f"{label_for(with_patches)}: installing into {venv} (log: {log})")
    venvs.create_venv(plan, log)
    return venvs.probe(venv, with_patches)


def choose_scorer(requested: str, data_dir: Path | None, searched: Path | None = None) -> str:
    """auto: lm-eval (the upstream report's tool) when installed and the hub is not declared
    offline; otherwise the builtin scorer on the local copy."""
    if requested != "auto":
        return requested
    offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1"
    if lm_eval_runner.lm_eval_command() is not None and not offline:
        return "lm-eval"
    if data_dir is None:
        raise DataNotFoundError(
            f"lm-eval is not available and no local GSM8K copy was found at {searched or dataset.default_data_dir()}"
        )
    return "builtin"


def score_builtin(
    config: SmokeConfig, server: ManagedServer, label: str
) -> tuple[dict[str, scoring.MetricResult], str, str]:
    if config.data_dir is None:
        searched = config.data_searched or dataset.default_data_dir()
        raise DataNotFoundError(f"no local GSM8K copy at {searched}; pass --data")
    test_docs, train_docs = dataset.load_splits(config.data_dir)
    if config.limit is not None:
        test_docs = test_docs[: config.limit]
    prompt_texts = prompts.build_prompts(test_docs, train_docs)
    client = CompletionsClient(
        server.base_url,
        CompletionSettings(
            model=config.model, max_tokens=config.max_tokens, request_timeout_s=config.request_timeout_s
        ),
    )
    note(f"{label}: {len(prompt_texts)} questions, {config.concurrency} at a time")
    completions = client.complete_all(
        prompt_texts,
        concurrency=config.concurrency,
        on_done=ProgressPrinter(label),
        liveness_check=server.check_alive,
    )
    items, metrics = scoring.score_completions(completions, [doc.answer for doc in test_docs])
    samples_path = config.report_dir / f"samples-{label}.jsonl"
    with samples_path.open("w", encoding="utf-8") as samples:
        for item, doc in zip(items, test_docs, strict=True):
            record = {
                "index": item.index,
                "question": doc.question,
                "target": dataset_target(doc.answer),
                "completion": item.completion,
                "extracted": item.extracted,
                "correct": item.correct,
            }
            samples.write(json.dumps(record) + "\n")
    return metrics, f"local copy {config.data_dir}", str(samples_path)


def dataset_target(answer: str) -> str:
    return answer.rsplit("#### ", 1)[-1].strip()


def score_lm_eval(config: SmokeConfig, server: ManagedServer, label: str) -> dict[str, scoring.MetricResult]:
    command = lm_eval_runner.lm_eval_command()
    if command is None:
        raise LmEvalError("--scorer lm-eval was asked for, but lm_eval is not installed here")
    output_dir = config.report_dir / f"lm-eval-{label}"
    argv = lm_eval_runner.build_lm_eval_argv(
        command,
        base_url=server.base_url,
        model=config.model,
        concurrency=config.concurrency,
        output_dir=output_dir,
        limit=config.limit,
    )
    note(f"{label}: {' '.join(argv)}")
    return lm_eval_runner.run_lm_eval(
        argv,
        log_path=config.report_dir / f"lm-eval-{label}.log",
        output_dir=output_dir,
        liveness_check=server.check_alive,
    )


def run_once(config: SmokeConfig, with_patches: bool) -> RunResult:
    label = label_for(with_patches)
    started = time.monotonic()
    env = prepare_env(config, with_patches)
    prepared = time.monotonic()
    fix_active = env.fix_active(config.backend)
    note(f"{label}: versions {env.versions}; fix active for {config.backend}: {fix_active}")
    port = config.port or free_port(config.host)
    argv = serve_argv(config, env.vllm, port)
    notes: list[str] = []
    samples_path: str | None = None
    scorer = choose_scorer(config.scorer, config.data_dir, config.data_searched)
    server = ManagedServer(
        argv,
        base_url=f"http://{config.host}:{port}",
        log_path=config.report_dir / f"server-{label}.log",
        env={**os.environ, **dict(config.server_env)} if config.server_env else None,
        health_timeout_s=config.health_timeout_s,
    )
    note(f"{label}: starting {' '.join(argv)}")
    with server:
        server_start_s = server.wait_healthy()
        note(f"{label}: server healthy after {server_start_s:.0f} s")
        eval_started = time.monotonic()
        if scorer == "lm-eval":
            try:
                metrics = score_lm_eval(config, server, label)
                data = "lm-eval (openai/gsm8k from the Hugging Face hub)"
            except LmEvalError as err:
                # Falling back is only safe when the server is still fine and we have the data.
                server.check_alive()
                if config.scorer == "lm-eval" or config.data_dir is None:
                    raise
                first_line = str(err).splitlines()[0]
                notes.append(f"lm-eval failed ({first_line}); scored with the builtin scorer instead")
                note(f"{label}: {notes[-1]}")
                scorer = "builtin"
        if scorer == "builtin":
            metrics, data, samples_path = score_builtin(config, server, label)
        eval_s = time.monotonic() - eval_started
    if with_patches and fix_active is False:
        notes.append("the fixed wheel is installed but output_is_reduced() is still False: the fix is not live")
    return RunResult(
        label=label,
        with_patches=with_patches,
        fix_active=fix_active,
        versions=env.versions,
        serve_argv=argv,
        scorer=scorer,
        data=data,
        metrics=metrics,
        durations_s={
            "environment": prepared - started,
            "server_start": server_start_s,
            "evaluation": eval_s,
            "total": time.monotonic() - started,
        },
        notes=notes,
        samples_path=samples_path,
    )


def judge(report: SmokeReport) -> None:
    """Fill passed/verdict: the gated run must clear the threshold, and a fixed run must have the fix live."""
    run = report.gated_run()
    value = run.metrics[report.gate_metric].value
    reasons = []
    if value < report.threshold:
        reasons.append(f"{run.label} {report.gate_metric} {value:.4f} < threshold {report.threshold:.2f}")
    if run.with_patches and run.fix_active is False:
        reasons.append("the fixed wheel's output_is_reduced() is False: the fix is not active")
    report.passed = not reasons
    report.verdict = (
        "; ".join(reasons)
        if reasons
        else (f"{run.label} {report.gate_metric} {value:.4f} ≥ threshold {report.threshold:.2f}")
    )
