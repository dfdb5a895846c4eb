"""TEST DOUBLE for the model server -- not a model, and never used outside tests.

Speaks the two endpoints the smoke uses from `vllm serve`: GET /health and
POST /v1/completions (OpenAI completions shape). It answers GSM8K prompts by looking the
last question of the prompt up in a test.jsonl, so tests know the exact right answer.

Invoked either directly or in `vllm serve` shape (`fake_completions_server.py serve MODEL
--host H --port P ...`; unknown vLLM flags are accepted and recorded), so the real
`vllm serve` command line built by release.gsm8k.server can start it. Behaviour comes from
flags, or from FAKE_MODEL_* environment variables when started through that command line:

  --mode / FAKE_MODEL_MODE                correct | wrong | alternate (right on even question
                                          numbers of the data file, wrong on odd) | no-answer
  --healthy-after / FAKE_MODEL_HEALTHY_AFTER    seconds /health answers 503 before 200
  --crash-after / FAKE_MODEL_CRASH_AFTER        exit(3) on the request after this many answered
  --child-pid-file / FAKE_MODEL_CHILD_PID_FILE  fork a long-sleeping child and write its pid
                                                (stands in for vLLM's engine/worker processes)
  --ignore-sigterm / FAKE_MODEL_IGNORE_SIGTERM=1   ignore SIGTERM (forces the SIGKILL path)
  --exit-at-start / FAKE_MODEL_EXIT_AT_START=N     exit with code N before listening
  --argv-file / FAKE_MODEL_ARGV_FILE              write our argv as JSON (to check the flags)
  --delay / FAKE_MODEL_DELAY                      seconds each completion takes
GET /stats answers {"answered": n, "max_in_flight": m, "requests": [...]} for assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

LAST_QUESTION = re.compile(r"Question: (?P<question>(?:(?!Question: ).)*?)\nAnswer:$", re.S)


def parse_args(argv: list[str]) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description="test double for `vllm serve` (GSM8K smoke tests)")
    parser.add_argument("command", nargs="?", help="'serve' when started in vllm shape")
    parser.add_argument("model", nargs="?", default="fake-model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", default=env("FAKE_MODEL_DATA", ""))
    parser.add_argument("--mode", default=env("FAKE_MODEL_MODE", "correct"))
    parser.add_argument("--healthy-after", type=float, default=float(env("FAKE_MODEL_HEALTHY_AFTER", "0")))
    parser.add_argument("--crash-after", type=int, default=int(env("FAKE_MODEL_CRASH_AFTER", "-1")))
    parser.add_argument("--child-pid-file", default=env("FAKE_MODEL_CHILD_PID_FILE", ""))
    parser.add_argument("--ignore-sigterm", action="store_true", default=env("FAKE_MODEL_IGNORE_SIGTERM") == "1")
    parser.add_argument("--exit-at-start", type=int, default=int(env("FAKE_MODEL_EXIT_AT_START", "-1")))
    parser.add_argument("--argv-file", default=env("FAKE_MODEL_ARGV_FILE", ""))
    parser.add_argument("--delay", type=float, default=float(env("FAKE_MODEL_DELAY", "0")))
    args, unknown = parser.parse_known_args(argv)
    args.unknown = unknown
    return args


def load_answers(path: str) -> dict[str, tuple[int, str]]:
    answers: dict[str, tuple[int, str]] = {}
    if path:
        with open(path, encoding="utf-8") as lines:
            for index, line in enumerate(lines):
                record = json.loads(line)
                answers[record["question"]] = (index, record["answer"])
    return answers


def respond(mode: str, index: int, solution: str) -> str:
    final = solution.rsplit("#### ", 1)[1].strip()
    right = mode == "correct" or (mode == "alternate" and index % 2 == 0)
    if mode == "no-answer":
        return " I am not sure how to solve this."
    if right:
        # Trailing text after a stop sequence checks that stop is honoured, as vLLM does.
        return " " + solution + "\n\nQuestion: a follow-up the model should never reach"
    return f" Let me think. #### {final}1"  # appending a digit always makes it wrong


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    if args.argv_file:
        Path(args.argv_file).write_text(json.dumps(argv))
    if args.exit_at_start >= 0:
        print(f"fake server: exiting with {args.exit_at_start} at start, as asked", flush=True)
        sys.exit(args.exit_at_start)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.child_pid_file:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        Path(args.child_pid_file).write_text(str(child.pid))
    answers = load_answers(args.data)
    started = time.monotonic()
    answered = 0
    in_flight = 0
    max_in_flight = 0
    requests: list[dict[str, object]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: dict[str, object] | None = None) -> None:
            payload = json.dumps(body or {}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            if self.path == "/stats":
                with lock:
                    self._send(200, {"answered": answered, "max_in_flight": max_in_flight, "requests": requests})
            elif self.path != "/health":
                self._send(404, {"error": "not found"})
            elif time.monotonic() - started < args.healthy_after:
                self._send(503, {"error": "loading"})
            else:
                self._send(200)

        def do_POST(self) -> None:
            nonlocal answered, in_flight, max_in_flight
            if self.path != "/v1/completions":
                self._send(404, {"error": "not found"})
                return
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                if 0 <= args.crash_after <= answered:
                    print("fake server: crashing mid-run, as asked", flush=True)
                    os._exit(3)
                answered += 1
                in_flight += 1
                max_in_flight = max(max_in_flight, in_flight)
                requests.append({key: value for key, value in request.items() if key != "prompt"})
            time.sleep(args.delay)
            # Out of flight before the answer is written: the client may send its next request
            # the moment it reads this one, and that one must not count as a third in flight.
            with lock:
                in_flight -= 1
            self._answer(request)

        def _answer(self, request: dict[str, object]) -> None:
            if request.get("model") != args.model:
                self._send(404, {"error": f"model {request.get('model')!r} does not exist"})
                return
            match = LAST_QUESTION.search(str(request["prompt"]))
            found = answers.get(match.group("question")) if match else None
            if found is None:
                self._send(400, {"error": "prompt does not end in a known GSM8K question"})
                return
            text = respond(args.mode, *found)
            stops = request.get("stop")
            for stop in stops if isinstance(stops, list) else []:
                text = text.split(stop, 1)[0]
            self._send(200, {"object": "text_completion", "model": args.model, "choices": [{"index": 0, "text": text}]})

        def log_message(self, format: str, *items: object) -> None:
            print(f"fake server: {format % items}", flush=True)

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"fake server: listening on {args.host}:{args.port}, unknown args {args.unknown}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
