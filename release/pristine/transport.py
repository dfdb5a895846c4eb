"""Every HTTP read of the tooling: one session, bounded waits, safe retries, one error.

A package index, a mirror or a file host may be slow, broken or hostile; none of that may
hang a command or end it in a traceback. So every read here has
- a timeout per request: connecting, and waiting for the next bytes (VLLM_FUSED_MOE_HTTP_TIMEOUT);
- a deadline on the whole read, retries and waits included (VLLM_FUSED_MOE_HTTP_DEADLINE): a
  server that drips one byte a second never trips a read timeout, so the body is read one
  receive at a time (`read1`) and the clock is checked between them;
- retries with exponential backoff (VLLM_FUSED_MOE_HTTP_RETRIES) for 429, 5xx, resets and
  timeouts, by urllib3's `Retry` before the answer's head arrives (Retry-After honoured, capped
  at the request timeout), and by `_attempts` when the body breaks off: every request we make
  is a GET of a page or of a byte range, which is safe to repeat;
- one failure class, TransportError (release.core.errors, exit 4), whose one line says what was
  asked and what came back.

What an answer must be (a status, a Content-Range, a length) is the caller's to check
(`expect`); a wrong answer is a TransportError too, never an assertion or a parse error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from release.core.errors import BadInputError, TransportError

USER_AGENT = "vllm-fused-moe-release (+https://github.com/vllm-project/vllm)"
TIMEOUT_ENV = "VLLM_FUSED_MOE_HTTP_TIMEOUT"
DEADLINE_ENV = "VLLM_FUSED_MOE_HTTP_DEADLINE"
RETRIES_ENV = "VLLM_FUSED_MOE_HTTP_RETRIES"
# 30 s without a byte is a dead link, not a slow one. 900 s for a whole read is the largest
# release wheel (470 MB) at 0.5 MB/s; a page or a range takes well under a second.
DEFAULTS = {TIMEOUT_ENV: 30.0, DEADLINE_ENV: 900.0, RETRIES_ENV: 3.0}
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
BACKOFF = 0.5  # seconds, doubled at each retry (urllib3's backoff_factor)
CHUNK = 1 << 20


@dataclass(frozen=True)
class Settings:
    timeout: float  # connect, and the longest wait for the next bytes
    deadline: float  # the longest one whole read may take
    retries: int  # repeats after a retryable failure


def settings() -> Settings:
    """The waits, from the environment (read at each call, so a test or a user may change them)."""
    values = {}
    for name, default in DEFAULTS.items():
        text = os.environ.get(name, "").strip()
        try:
            value = float(text) if text else default
        except ValueError:
            value = -1.0
        if not (value > 0 or (name == RETRIES_ENV and value == 0)):
            raise BadInputError(
                f"{name}={text!r} is not a positive number of {'retries' if name == RETRIES_ENV else 'seconds'}",
                hint=f"unset it for the default ({default:g}) or give a number; docs/guarantees.md says what it bounds",
            )
        values[name] = value
    return Settings(values[TIMEOUT_ENV], values[DEADLINE_ENV], int(values[RETRIES_ENV]))


@cache
def _session(retries: int, timeout: float) -> requests.Session:
    """One keep-alive session per setting: a lazy read is a handful of requests to the same host."""
    retry = Retry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        other=0,
        allowed_methods=frozenset({"GET", "HEAD"}),
        status_forcelist=RETRY_STATUSES,
        backoff_factor=BACKOFF,
        backoff_max=timeout,
        retry_after_max=int(max(1, timeout)),  # a hostile Retry-After must not park us for hours
        raise_on_status=False,  # the last answer comes back, and the caller names its status
        respect_retry_after_header=True,
    )
    session = requests.Session()
    session.headers["User-Agent"] = USER_AGENT
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class Deadline:
    """The end of one whole read."""

    def __init__(self, what: str, seconds: float) -> None:
        self.what = what
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def check(self, done: str = "") -> None:
        if self.left() <= 0:
            raise TransportError(
                f"{self.what}: not done within {self.seconds:g} s{f' ({done})' if done else ''} ({DEADLINE_ENV})"
            )


class Retryable(Exception):
    """A failure that a repeat of the same GET may not meet again (a reset, a cut body, a stall)."""


@dataclass
class Answer:
    """One answer whose head the caller accepted; the body is read by `read_body`."""

    url: str  # after redirects
    status: int
    headers: Mapping[str, str]
    response: requests.Response


Expect = Callable[[Answer], None]
Sink = Callable[[bytes], None]

NETWORK_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, OSError)


def get(
    url: str,
    what: str,
    *,
    headers: Mapping[str, str] | None = None,
    expect: Expect | None = None,
    sink: Sink | None = None,
    restart: Callable[[], None] | None = None,
    limit: int | None = None,
    deadline: Deadline | None = None,
) -> tuple[Answer, bytes]:
    """GET `url` and read its whole body, within the timeouts, the deadline and the retries.

    `expect` checks the answer's head before any of the body is read (it raises TransportError, or
    Retryable, or anything else the caller wants to escape with). The body goes to `sink` (then
    b"" is returned, and `restart` undoes what the sink got before a repeat) or comes back whole,
    refused beyond `limit` bytes. A body shorter than its Content-Length is a break, and repeated.
    """
    conf = settings()
    deadline = deadline or Deadline(what, conf.deadline)
    attempt = 0
    while True:
        deadline.check()
        try:
            return _once(url, what, headers or {}, expect, sink, limit, deadline, conf)
        except Retryable as exc:
            attempt += 1
            wait = min(BACKOFF * 2 ** (attempt - 1), conf.timeout)
            if attempt > conf.retries or deadline.left() <= wait:
                tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
                raise TransportError(f"{what}: {exc} ({tries})") from None
            time.sleep(wait)
            if restart is not None:
                restart()


def _once(
    url: str,
    what: str,
    headers: Mapping[str, str],
    expect: Expect | None,
    sink: Sink | None,
    limit: int | None,
    deadline: Deadline,
    conf: Settings,
) -> tuple[Answer, bytes]:
    wait = max(0.1, min(conf.timeout, deadline.left()))
    try:
        response = _session(conf.retries, conf.timeout).get(
            url, headers={"Accept-Encoding": "identity", **headers}, timeout=(wait, wait), stream=True
        )
    except NETWORK_ERRORS as exc:
        # urllib3 has already retried connecting and waiting for the head: this is final.
        raise TransportError(f"{what}: {_why(exc)}") from None
    with response:
        answer = Answer(response.url, response.status_code, response.headers, response)
        if expect is not None:
            expect(answer)
        body = read_body(answer, what, deadline, sink, limit)
    return answer, body


def read_body(answer: Answer, what: str, deadline: Deadline, sink: Sink | None, limit: int | None) -> bytes:
    """The body, one receive at a time, with the deadline checked between receives."""
    raw = answer.response.raw
    declared_text = answer.headers.get("Content-Length")
    declared = int(declared_text) if declared_text and declared_text.isdigit() else None
    if limit is not None and declared is not None and declared > limit:
        raise TransportError(f"{what}: the answer is {declared} bytes, more than the {limit} expected")
    parts: list[bytes] = []
    got = 0
    while True:
        deadline.check(f"{got} bytes read")
        try:
            block = raw.read1(CHUNK, decode_content=False)
        except NETWORK_ERRORS as exc:
            raise Retryable(f"the answer broke off after {got} bytes: {_why(exc)}") from None
        if not block:
            break
        got += len(block)
        if limit is not None and got > limit:
            raise TransportError(f"{what}: the answer is more than the {limit} bytes expected")
        if sink is not None:
            sink(block)
        else:
            parts.append(block)
    if declared is not None and got != declared:
        raise Retryable(f"the answer was cut short: {got} of {declared} bytes")
    return b"".join(parts)


def _why(exc: BaseException) -> str:
    """What broke, in a few words, from the innermost cause that urllib3 and requests wrap."""
    inner = exc
    for _ in range(8):
        nested = getattr(inner, "reason", None)
        if not isinstance(nested, BaseException):
            nested = next((a for a in reversed(getattr(inner, "args", ())) if isinstance(a, BaseException)), None)
        if nested is None or nested is inner:
            break
        inner = nested
    if isinstance(inner, urllib3.exceptions.ConnectTimeoutError | requests.exceptions.ConnectTimeout):
        return f"could not connect in time ({TIMEOUT_ENV})"
    if isinstance(inner, urllib3.exceptions.ReadTimeoutError | requests.exceptions.ReadTimeout | TimeoutError):
        return f"no bytes came for the request timeout ({TIMEOUT_ENV})"
    text = " ".join(str(inner).split())  # one line, whatever the library put in it
    text = text.split("): ", 1)[-1] if text.startswith(("HTTPConnectionPool(", "HTTPSConnectionPool(")) else text
    name = type(inner).__name__
    return text[:200] if text.startswith(name) else f"{name}: {text[:200]}" if text else name
