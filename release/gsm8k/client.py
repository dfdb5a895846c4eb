"""OpenAI-compatible /v1/completions over HTTP (stdlib only), with a concurrency limit.

Every failure of the transport (reset, refusal, timeout, an answer cut short or never finished,
429 or 5xx) is retried with backoff and ends as a CompletionRequestError, a TransportError: exit 4,
as for every command's network reads.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from release.core.errors import CompletionRequestError
from release.core.parse import parse_json
from release.gsm8k.prompts import MAX_GEN_TOKENS, STOP_SEQUENCES

# lm-eval's local-completions sends seed 1234 with every request (openai_completions.py).
REQUEST_SEED = 1234


@dataclass(frozen=True)
class CompletionSettings:
    model: str
    max_tokens: int = MAX_GEN_TOKENS
    stop: tuple[str, ...] = STOP_SEQUENCES
    request_timeout_s: float = 600.0
    retries: int = 3
    retry_backoff_s: float = 1.0


class CompletionsClient:
    def __init__(self, base_url: str, settings: CompletionSettings) -> None:
        self.endpoint = base_url.rstrip("/") + "/v1/completions"
        self.settings = settings

    def payload(self, prompt: str) -> dict[str, object]:
        # Greedy, as gsm8k.yaml asks (do_sample false, temperature 0).
        return {
            "model": self.settings.model,
            "prompt": prompt,
            "max_tokens": self.settings.max_tokens,
            "temperature": 0.0,
            "stop": list(self.settings.stop),
            "seed": REQUEST_SEED,
        }

    def complete(self, prompt: str) -> str:
        body = json.dumps(self.payload(prompt)).encode("utf-8")
        last_error = ""
        for attempt in range(self.settings.retries + 1):
            if attempt:
                time.sleep(self.settings.retry_backoff_s * attempt)
            request = urllib.request.Request(
                self.endpoint, data=body, headers={"Content-Type": "application/json"}, method="POST"
            )
            # The timeout bounds each wait for bytes; the deadline bounds the whole answer, which a
            # server that drips a byte at a time would otherwise stretch without end.
            deadline = time.monotonic() + self.settings.request_timeout_s
            try:
                with urllib.request.urlopen(request, timeout=self.settings.request_timeout_s) as response:
                    answer = parse_json(read_within(response, deadline), where=self.endpoint, error=ValueError)
                return str(answer["choices"][0]["text"])
            except urllib.error.HTTPError as err:
                last_error = f"HTTP {err.code}: {err.read()[:300]!r}"
                if err.code < 500 and err.code != 429:
                    break  # a 4xx other than rate limiting will not get better by asking again
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, http.client.HTTPException) as err:
                # Resets, refused connections, timeouts, an answer cut short: the transport broke; retried.
                last_error = f"{type(err).__name__}: {err}"
            except (KeyError, IndexError, TypeError, ValueError) as err:
                last_error = f"unexpected response shape: {err!r}"
                break
        raise CompletionRequestError(f"{self.endpoint}: {last_error}")

    def complete_all(
        self,
        prompts: Sequence[str],
        *,
        concurrency: int,
        on_done: Callable[[int, int], None] | None = None,
        liveness_check: Callable[[], None] | None = None,
        check_interval_s: float = 1.0,
    ) -> list[str]:
        """Completions in prompt order; `liveness_check` raising aborts the rest.

        The check runs while requests are in flight, so a server that dies mid-run is
        reported as a crash at once instead of as hundreds of refused connections.
        """
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        results: list[str | None] = [None] * len(prompts)
        executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="gsm8k-request")
        try:
            pending: dict[Future[str], int] = {
                executor.submit(self.complete, prompt): index for index, prompt in enumerate(prompts)
            }
            finished = 0
            while pending:
                done, _ = wait(pending, timeout=check_interval_s, return_when=FIRST_COMPLETED)
                if liveness_check is not None:
                    liveness_check()
                for future in done:
                    index = pending.pop(future)
                    results[index] = future.result()
                    finished += 1
                    if on_done is not None:
                        on_done(finished, len(prompts))
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
        return [text if text is not None else "" for text in results]


def read_within(response: http.client.HTTPResponse, deadline: float) -> bytes:
    """The whole body, one receive at a time, or TimeoutError once `deadline` (time.monotonic()) passed."""
    parts: list[bytes] = []
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the answer was not complete in time ({sum(len(p) for p in parts)} bytes so far)")
        block = response.read1(1 << 16)
        if not block:
            return b"".join(parts)
        parts.append(block)
