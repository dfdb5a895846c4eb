"""Completions client against the model-server test double: payload, order, concurrency limit, crash."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from helpers.gsm8k import fake_server_argv
from release.core.errors import CompletionRequestError, ServerCrashedError
from release.gsm8k.client import CompletionsClient, CompletionSettings
from release.gsm8k.dataset import load_splits
from release.gsm8k.prompts import STOP_SEQUENCES, build_prompts
from release.gsm8k.scoring import STRICT, score_completions
from release.gsm8k.server import ManagedServer, free_port

pytestmark = pytest.mark.timeout(30)


def start(tmp_path: Path, data: Path, *extra: str) -> ManagedServer:
    port = free_port()
    server = ManagedServer(
        fake_server_argv(port, "serve", "tiny-model", "--data", str(data / "test.jsonl"), *extra),
        base_url=f"http://127.0.0.1:{port}",
        log_path=tmp_path / "server.log",
        health_timeout_s=10,
        poll_interval_s=0.05,
        stop_grace_s=5,
    )
    server.start()
    server.wait_healthy()
    return server


def stats(server: ManagedServer) -> dict[str, Any]:
    with urllib.request.urlopen(f"{server.base_url}/stats", timeout=5) as response:
        said: dict[str, Any] = json.loads(response.read())
    return said


def test_completions_in_order_with_greedy_payload_and_limit(tmp_path: Path, tiny_data: Path) -> None:
    tests, train = load_splits(tiny_data)
    server = start(tmp_path, tiny_data, "--mode", "alternate", "--delay", "0.2")
    try:
        client = CompletionsClient(server.base_url, CompletionSettings(model="tiny-model"))
        seen: list[int] = []
        completions = client.complete_all(
            build_prompts(tests, train), concurrency=2, on_done=lambda done, total: seen.append(done)
        )
        recorded = stats(server)
    finally:
        server.stop()
    # alternate: right on even question numbers (0, 2, 4), wrong on odd ones.
    items, metrics = score_completions(completions, [doc.answer for doc in tests])
    assert [item.correct[STRICT] for item in items] == [True, False, True, False, True]
    assert metrics[STRICT].value == pytest.approx(3 / 5)
    # The server cut the completion at the "Question:" stop sequence we sent.
    assert completions[0] == " 3 + 4 = 7\n#### 7\n\n"
    assert seen == [1, 2, 3, 4, 5]
    assert recorded["max_in_flight"] == 2
    request = recorded["requests"][0]
    assert request["temperature"] == 0.0 and request["max_tokens"] == 256
    assert request["stop"] == list(STOP_SEQUENCES) and request["model"] == "tiny-model"


def test_wrong_model_name_fails_without_retrying_forever(tmp_path: Path, tiny_data: Path) -> None:
    tests, train = load_splits(tiny_data)
    server = start(tmp_path, tiny_data)
    try:
        client = CompletionsClient(server.base_url, CompletionSettings(model="other", retry_backoff_s=0.01))
        with pytest.raises(CompletionRequestError, match="HTTP 404"):
            client.complete(build_prompts(tests, train)[0])
    finally:
        server.stop()


def test_server_crash_mid_run_aborts_with_crash_error(tmp_path: Path, tiny_data: Path) -> None:
    tests, train = load_splits(tiny_data)
    server = start(tmp_path, tiny_data, "--crash-after", "2")
    try:
        client = CompletionsClient(server.base_url, CompletionSettings(model="tiny-model", retry_backoff_s=0.2))
        with pytest.raises((ServerCrashedError, CompletionRequestError)) as caught:
            client.complete_all(
                build_prompts(tests * 4, train), concurrency=1, liveness_check=server.check_alive, check_interval_s=0.05
            )
        assert isinstance(caught.value, ServerCrashedError), caught.value
        assert "crashing mid-run" in str(caught.value)
    finally:
        server.stop()
