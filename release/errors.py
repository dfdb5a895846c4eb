"""One exception type per failure kind; the CLI maps each to an exit code and a hint."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_CONFLICT = 3


class ReleaseError(Exception):
    """Base of every failure the CLI reports as one line plus a hint."""

    exit_code: int = EXIT_FAILED
    default_hint: str = ""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint if hint is not None else self.default_hint


class BadInputError(ReleaseError):
    """The user asked for something that cannot be done as given; nothing was changed."""

    exit_code = EXIT_BAD_INPUT


class UnknownTagError(BadInputError):
    default_hint = "list release tags with `git ls-remote --tags https://github.com/vllm-project/vllm` or `pip index versions vllm`"


class SourceError(BadInputError):
    default_hint = "--from takes git+URL, git:PATH, dir:PATH, wheel:PATH or pypi"


class MalformedPatchError(BadInputError):
    default_hint = "re-export the patch with `git format-patch` (see docs/adding-a-patch.md)"


class MalformedSeriesError(BadInputError):
    default_hint = "patches/series names one patch file a line; `#` starts a comment"


class DirtyVendorError(BadInputError):
    default_hint = "run `python -m release check` to see the hand edits; move them into a patch or discard them"


class ConfigError(BadInputError):
    default_hint = "vendor/vllm_fused_moe/UPSTREAM.toml is written by `python -m release rebase`; restore it from git"


class ConflictError(ReleaseError):
    """A patch neither applies nor is already upstream; the half-done state is kept."""

    exit_code = EXIT_CONFLICT


class ToolMissingError(ReleaseError):
    default_hint = "run through nox (`nox -s test`), which installs what the tooling needs"


class DriftError(ReleaseError):
    """vendor/ differs from pristine + series (reported by `check`)."""

    default_hint = "a hand edit belongs in a patch: docs/adding-a-patch.md"
