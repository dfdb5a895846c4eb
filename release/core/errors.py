"""One exception type per failure kind; the CLI maps each to an exit code and a hint."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_CONFLICT = 3
# The GSM8K smoke: accuracy below the gate is a plain failure (1); a run that measured nothing is 4.
EXIT_BELOW_THRESHOLD = EXIT_FAILED
EXIT_INFRASTRUCTURE = 4
EXIT_INTERRUPTED = 130


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
    default_hint = (
        "list release tags with `git ls-remote --tags https://github.com/vllm-project/vllm` or "
        "`pip index versions vllm`"
    )


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


class GitError(ReleaseError):
    """A git command failed; the message names the command and quotes git."""

    default_hint = "run the quoted git command by hand to see the whole story"


class DriftError(ReleaseError):
    """vendor/ differs from pristine + series (reported by `check`)."""

    default_hint = "a hand edit belongs in a patch: docs/adding-a-patch.md"


class UnknownPatchError(BadInputError):
    default_hint = (
        "name a patch by path, by file name in patches/, or by its number (`0001`); "
        "`python -m release status` lists them"
    )


class AlreadyUpstreamError(BadInputError):
    default_hint = "a retired patch has nothing left to send; see patches/retired/ and its Applied-Upstream trailer"


class PatchDoesNotApplyError(BadInputError):
    default_hint = "the patch must apply to the pristine pinned tag on its own; re-export it (docs/maintainers.md)"


class CloneError(BadInputError):
    default_hint = "--vllm takes a clone of https://github.com/vllm-project/vllm with the pinned tag fetched"


class DirtyCloneError(BadInputError):
    default_hint = "commit, stash or discard the changes in the clone first (`git -C PATH status`)"


class BranchExistsError(BadInputError):
    default_hint = "delete it (`git -C PATH branch -D BRANCH`) to regenerate it, or push the one you have"


class RemoteError(ReleaseError):
    """`git ls-remote` could not list the remote's tags (network, URL, authentication)."""

    default_hint = "check the URL and the network; `git ls-remote --tags URL` shows git's own message"


class BadTagError(BadInputError):
    default_hint = "a release tag looks like v0.21.0 or v0.21.0.post1"


class BuildError(ReleaseError):
    """The PEP 517 build itself failed."""

    default_hint = "run the printed command by hand in the staging directory to see the backend's output"


class BadPatchLevelError(BadInputError):
    default_hint = "--patch-level is a positive integer; raise it whenever a release changes the wheel's contents"


class DataNotFoundError(BadInputError):
    default_hint = (
        "pass --data DIR holding test.jsonl and train.jsonl (CI keeps a copy in ../shared/data/gsm8k/ beside the clone)"
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


class BadWheelError(BadInputError):
    default_hint = "publish only wheels built by `python -m release build` or downloaded from a package index"


class IndexClashError(BadInputError):
    default_hint = (
        "a published file is never replaced: raise the version (`release build --patch-level N`) and publish again"
    )


class IndexNotWritableError(BadInputError):
    default_hint = "publish into a directory you may write (the index was left as it was)"


class IndexCorruptError(BadInputError):
    default_hint = (
        "the index directory is half-written or was edited by hand; compare simple/<project>/ with its "
        "index.html, remove stray files, and publish again"
    )


class PublishError(ReleaseError):
    default_hint = "the index was restored to what it was before; check the disk and publish again"


# ----------------------------------------------------------------- hardening


class UnsafeSourceError(SourceError):
    """A source holds a name or an entry that would read or write outside the subtree."""

    default_hint = (
        "a source may hold only regular files inside the vendored subtree: no `..` or absolute names, "
        "no symbolic links, no submodules; nothing was written"
    )


class VersionProofError(SourceError):
    """A source cannot prove that it is the release tag it was asked for."""

    default_hint = (
        "a wheel proves its version by .dist-info/METADATA, a git source by the tag itself, a dir: source by "
        "vllm/_version.py (written by setuptools-scm on install) or a static version in pyproject.toml"
    )


class LockedError(BadInputError):
    """Another command holds the repository (or index) lock."""

    default_hint = (
        "wait for the other command to finish, or raise VLLM_FUSED_MOE_LOCK_TIMEOUT (seconds); the lock "
        "is released by the operating system when its holder exits, even when killed"
    )


class WorkDirError(BadInputError):
    default_hint = "the conflict report names the work directory; `python -m release rebase --abort DIR` drops any"


class JournalError(ReleaseError):
    """An interrupted swap cannot be finished by itself."""

    default_hint = "docs/guarantees.md says how to finish or undo an interrupted swap by hand"


class AfterSwapError(ReleaseError):
    """The tree changed as asked, then something after the swap failed."""

    default_hint = "the change itself is complete (`python -m release check` agrees); only this last step failed"


class DirtyTreeError(BadInputError):
    default_hint = (
        "commit or discard the changes (`python -m release check`, `git status vendor/ patches/`), or pass "
        "--allow-dirty to build a wheel whose version and build info say it is dirty"
    )


class OutputNotWritableError(BadInputError):
    default_hint = "name a directory you may write (it is created if missing)"
