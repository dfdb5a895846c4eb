"""Failure kinds of the GSM8K smoke; each maps to one exit code (see `cli.EXIT_CODES_HELP`)."""

from __future__ import annotations

from release.errors import BadInputError, ReleaseError

# Accuracy below the gate is the smoke's "real" failure (exit 1, release.errors.EXIT_FAILED);
# a broken harness or environment gets its own code so CI can tell "the model got
# worse" from "the run never measured anything".
EXIT_BELOW_THRESHOLD = 1
EXIT_INFRASTRUCTURE = 4
EXIT_INTERRUPTED = 130


class DataNotFoundError(BadInputError):
    default_hint = (
        "pass --data DIR holding test.jsonl and train.jsonl "
        "(CI keeps a copy in ../shared/data/gsm8k/ beside the clone)"
    )


class MalformedDataError(BadInputError):
    default_hint = 'each line must be a JSON object {"question": ..., "answer": "... #### N"}'


class InfrastructureError(ReleaseError):
    """The smoke could not measure anything: install, server or transport broke."""

    exit_code = EXIT_INFRASTRUCTURE


class InstallError(InfrastructureError):
    default_hint = "check --index (a PEP 503 directory with simple/) and that the wheel was published there"


class ServerStartError(InfrastructureError):
    """The server process exited before it became healthy."""

    default_hint = "read the server log tail above; the full log is in the report directory"


class HealthTimeoutError(InfrastructureError):
    """The server stayed up but never answered /health in time."""

    default_hint = "raise --health-timeout (a 120B model can take 20+ minutes to load) or read the log tail"


class ServerCrashedError(InfrastructureError):
    """The server was healthy, then exited while requests were in flight."""

    default_hint = "read the server log tail above; the full log is in the report directory"


class CompletionRequestError(InfrastructureError):
    """A completions request kept failing after its retries."""

    default_hint = "the server answered with errors; read its log in the report directory"


class LmEvalError(InfrastructureError):
    default_hint = "run with --scorer builtin to score from the local data copy instead"
