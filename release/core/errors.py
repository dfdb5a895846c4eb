"""One exception type per failure kind; the CLI maps each to an exit code and a hint.

First the families, one per exit code (ReleaseError is 1); then the kinds, each derived from
its family, with a docstring saying when it is raised and the one-line hint the CLI prints.
Each kind has a stable `reference`, its class name in kebab-case without "Error" (MissingFixError:
`missing-fix`), derived once here: the CLI prints it in the error line (`error[missing-fix]: ...`),
docs/architecture.md lists each with its exit code (`reference_table()`), and tests assert it.

Longer than 500 lines on purpose: the hierarchy reads as one table of failure kinds, each a few lines
with its hint and exit code; split, the map the CLI and docs/architecture.md rely on would scatter.
"""

from __future__ import annotations

import errno
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_CONFLICT = 3
# The network broke (release/pristine/transport.py): the same code from every command that reads it.
EXIT_TRANSPORT = 4
# The GSM8K smoke: accuracy below the gate is a plain failure (1); a run that measured nothing is 4,
# the transport code, since most such runs are a server or a link that broke.
EXIT_BELOW_THRESHOLD = EXIT_FAILED
EXIT_INFRASTRUCTURE = EXIT_TRANSPORT
EXIT_INTERRUPTED = 130


def kebab(name: str) -> str:
    """A class name as its reference: MissingFixError -> missing-fix, NoGpuError -> no-gpu."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name.removesuffix("Error")).lower()


class ReleaseError(Exception):
    """Base of every failure the CLI reports as one line plus a hint."""

    exit_code: int = EXIT_FAILED
    default_hint: str = ""
    # The stable name of the kind, printed in its error line; a subclass's is derived from its name.
    reference: str = "failed"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "reference" not in cls.__dict__:
            cls.reference = kebab(cls.__name__)

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint if hint is not None else self.default_hint


class BadInputError(ReleaseError):
    """The user asked for something that cannot be done as given; nothing was changed."""

    exit_code = EXIT_BAD_INPUT


class ConflictError(ReleaseError):
    """A patch neither applies nor is already upstream; the half-done state is kept."""

    exit_code = EXIT_CONFLICT


class InfrastructureError(ReleaseError):
    """The smoke could not measure anything: install, server or transport broke."""

    exit_code = EXIT_INFRASTRUCTURE


class TransportError(ReleaseError):
    """The network broke: a package index, file host, git remote or server did not answer in time, cut an
    answer short, or answered with something other than what was asked (after the retries that are safe).

    The one class for every network read of every command (release/pristine/transport.py), so the exit
    code (4) means the same everywhere; what was asked and what came back is in the message."""

    exit_code = EXIT_TRANSPORT
    default_hint = (
        "nothing was changed; run it again (429, 5xx, resets and timeouts were already retried). "
        "Waits are set by VLLM_FUSED_MOE_HTTP_TIMEOUT, VLLM_FUSED_MOE_HTTP_DEADLINE and "
        "VLLM_FUSED_MOE_HTTP_RETRIES (docs/guarantees.md); another index by VLLM_FUSED_MOE_INDEX_URL"
    )


class UnknownTagError(BadInputError):
    """A well-formed tag that the source does not have, or a tag that is no vLLM release."""

    default_hint = "`python -m release tags` lists the releases newer than the pin; `pip index versions vllm`, all"

    def __init__(self, *, tag: str, source: str = "", index: str = "", hint: str | None = None) -> None:
        """`tag` as it may be shown; `source`: the git source without it; `index`: the package index without it
        (neither: it is no vLLM release tag at all)."""
        self.tag, self.source, self.index = tag, source, index
        if index:
            message = f"no vLLM release {tag} on the package index ({index})"
        elif source:
            message = f"{source} has no tag {tag}"
        else:
            message = f"{tag} is not a vLLM release tag (expected vX.Y.Z or vX.Y.Z.postN)"
        super().__init__(message, hint)


class SourceError(BadInputError):
    """`--from SOURCE` names no source we read, or the source cannot be read."""

    default_hint = "--from takes git+URL, git:PATH, dir:PATH, wheel:PATH or pypi"


class MalformedPatchError(BadInputError):
    """A file in patches/ is not a `git format-patch` mail of the vendored subtree."""

    default_hint = 're-export the patch with `git format-patch` (docs/patch-queue.md, "Add a patch")'


class MalformedSeriesError(BadInputError):
    """patches/series names a missing file, or one twice."""

    default_hint = "patches/series names one patch file a line; `#` starts a comment"


class SilentLineError(MalformedSeriesError):
    """A release line's series says nothing about a common patch of patches/series."""

    default_hint = (
        "a line's series accounts for every common patch: its own variant (Varies: NAME), `take NAME` or "
        "`skip NAME: why`; `python -m release pq carry NAME` makes the variants that apply (docs/patch-queue.md)"
    )


class MisorderedLineError(MalformedSeriesError):
    """A release line's series replays the common patches in another order than patches/series."""

    default_hint = (
        "move the line's entries (its variants and `take NAME` lines) into the order of patches/series: a later "
        "patch is made on the files the earlier ones leave; nothing was changed"
    )


class MissingFixError(BadInputError):
    """A tag is affected by a bug (the scan data), but what would be shipped for it carries no patch for it."""

    default_hint = (
        "a tag older than a retired patch's Applied-Upstream replays it (patches/series `retired NAME`); a line "
        "that skips a bug's patch needs a variant of it (`python -m release pq carry NAME`), or the skip proven "
        "(`python -m release evidence`) and, where the scan data says it, that release scanned again after the proof "
        "(`python -m release scan --since TAG --until TAG`); nothing was changed"
    )

    def __init__(
        self,
        *,
        what: str,
        tag: str,
        bugs: Sequence[tuple[str, str, str]],
        carrying: Sequence[str],
        line: str = "",
        hint: str | None = None,
    ) -> None:
        """`what` refused it ("check", "not building v0.20.0"); `bugs`: (id, title, where that is known from) of each
        bug `tag` has that what it would ship does not fix; `carrying`: the patches it would ship; `line`: its line."""
        self.what, self.tag, self.bugs, self.carrying, self.line = what, tag, tuple(bugs), tuple(carrying), line
        said = "; ".join(bug + (f" ({title})" if title else "") + f" ({source})" for bug, title, source in bugs)
        on = f" (line {line})" if line else ""
        has = ", ".join(carrying) or "no patch"
        super().__init__(
            f"{what}: vLLM {tag}{on} is affected by {said}, but its replay would not fix it (it carries {has})", hint
        )


class UnprovenWheelError(BadInputError):
    """A wheel lacks evidence: a bug's regression test did not fail cleanly on its pristine vLLM release and pass
    cleanly with the wheel installed (release/evidence), or the evidence says less than the records or the index."""

    default_hint = (
        "the wheel must carry the fix of every bug its release has, proven by the bug's test "
        "(patches/upstream-tests/): where the wheel run fails, rebuild the wheel from this checkout "
        "(`nox -s build -- --tag TAG`); where a run errors, its detail says why; nothing was published"
    )

    def __init__(self, *, what: str, problems: Sequence[str], hint: str | None = None) -> None:
        """`what` refused it ("not publishing W.whl", or the file); `problems`: each thing the evidence lacks."""
        self.what, self.problems = what, tuple(problems)
        super().__init__(f"{what}: " + "; ".join(problems), hint)


class UnprovenSkipError(BadInputError):
    """A release line's series skips a bug's patch, but nothing proves that line's release does without the bug:
    no clean pass of the bug's regression test on the release as published (release/queue/skip_proof.py)."""

    default_hint = (
        "prove the skip: `python -m release evidence --line LINE` (`nox -s evidence -- --line LINE`; the tool "
        "makes the line's proving environment), or carry the fix to the line (`python -m release pq carry NAME`); "
        "nothing was changed"
    )

    def __init__(
        self,
        *,
        what: str,
        skips: Sequence[str],
        tag: str = "",
        line: str = "",
        patch: str = "",
        hint: str | None = None,
    ) -> None:
        """`what` refused it; `skips`: a sentence for each skip not proven. With the `tag`, `line` and skipped `patch`
        the hint names the commands that prove the skip on that tag or carry the fix."""
        self.what, self.skips, self.tag, self.line, self.patch = what, tuple(skips), tag, line, patch
        if hint is None and tag and line:
            hint = (
                f"run `python -m release evidence --tag {tag} --on {line}` (`nox -s evidence -- --tag {tag} --on "
                f"{line}`; the tool makes the line's proving environment): it proves the skip where the test passes on "
                "the pristine release; where it fails, the release has the bug: carry the fix (`python -m release pq "
                f"carry {patch or 'NAME'}`); nothing was changed"
            )
        super().__init__(f"{what}: " + "; ".join(skips), hint)


class StaleVariantError(BadInputError):
    """A line's variant that `pq carry` made (`Carried-From:`) from another version of the common patch than
    the one patches/ holds: the line's tags would ship the old change while the newer lines ship the new one."""

    default_hint = (
        "carry the changed patch again with `python -m release pq carry NAME`, then re-record the train "
        "(`python -m release train add --all`); nothing was changed"
    )

    def __init__(self, *, what: str, stale: Sequence[str], commons: Sequence[str], hint: str | None = None) -> None:
        """`what` refused it; `stale`: a sentence for each stale variant; `commons`: the common patches they vary."""
        self.what, self.stale, self.commons = what, tuple(stale), tuple(commons)
        if hint is None and commons:
            commands = " and ".join(f"`python -m release pq carry {name}`" for name in sorted(set(commons)))
            hint = f"run {commands}, then `python -m release train add --all`; nothing was changed"
        super().__init__(f"{what}: " + "; ".join(stale), hint)


class UnrecordedChangeError(BadInputError):
    """A train tag carries other patches than patches/train.toml records for its patch level."""

    default_hint = (
        "re-record the tag (`python -m release train add TAG`, or `--all`): it records what the tag carries "
        "and raises its patch level above the one before; nothing was built"
    )


class PatchLevelNotAboveError(BadInputError):
    """publish: a wheel at or below the newest patch level the index holds for its vLLM release, with other files."""

    default_hint = (
        "a tag's patch level only goes up: `python -m release build` raises it when the wheel's files change "
        "and records it in patches/train.toml; for an index that holds a level this checkout never recorded, "
        "`build --tag TAG --patch-level N` with N above the index's newest records N there too; nothing was published"
    )


class DirtyVendorError(BadInputError):
    """vendor/ is not pristine + series, so a rebase or a PR would lose hand edits."""

    default_hint = "run `python -m release check` to see the hand edits; move them into a patch or discard them"


class NotACheckoutError(BadInputError):
    """No checkout to work on: an installed command run outside one, without --root."""

    default_hint = "run it inside a clone of vllm-fused-moe, or name one with --root CHECKOUT"


class ConfigError(BadInputError):
    """UPSTREAM.toml or VERIFIED.toml is missing or malformed (the train file: TrainFileError)."""

    default_hint = "vendor/vllm_fused_moe/UPSTREAM.toml is written by `python -m release rebase`; restore it from git"


class TrainFileError(ConfigError):
    """patches/train.toml is missing or malformed: a tag not in its one spelling or listed twice, a control
    character, a release line patches/lines.toml does not define, a key the train does not have."""

    default_hint = (
        "patches/train.toml is written by `python -m release train add|remove` and `rebase`: correct the entry "
        "the message names (tags as vX.Y.Z, each once, on a line of patches/lines.toml) or restore it from git"
    )


class ToolMissingError(ReleaseError):
    """A program the tooling runs (git, PyPA build) is not installed."""

    default_hint = "run through nox (`nox -s test`), which installs what the tooling needs"


class ModuleMissingError(ToolMissingError):
    """A Python module the tooling imports is not installed in this interpreter."""

    default_hint = (
        "install the tooling with its dependencies: `python3 -m pip install --group tooling` in the checkout "
        '(`python -m release`; --group needs pip 25.1 or newer: `python3 -m pip install "pip>=25.1"` first), '
        "or `pipx install .`, `uv tool install .` or `pip install .` "
        "(`vllm-fused-moe-release`); nox sessions install it themselves"
    )

    @classmethod
    def of(cls, module: str) -> ModuleMissingError:
        import sys  # the message names the interpreter that lacks it

        return cls(f"the tooling needs the Python module {module!r}, which {sys.executable} does not have")


class GitError(ReleaseError):
    """A git command failed; the message names the command and quotes git."""

    default_hint = "run the quoted git command by hand to see the whole story"


class DriftError(ReleaseError):
    """vendor/ differs from pristine + series (`check`, after listing each file on stdout)."""

    default_hint = 'a hand edit belongs in a patch: docs/patch-queue.md, "Add a patch"'


class UnknownPatchError(BadInputError):
    """`upstream-pr PATCH` names no patch of the queue."""

    default_hint = "name a patch by path, file name or number (`0001`); `python -m release status` lists them"


class AlreadyUpstreamError(BadInputError):
    """`upstream-pr` was asked for a patch that upstream already took."""

    default_hint = "a retired patch has nothing left to send; see patches/retired/ and its Applied-Upstream trailer"


class PatchDoesNotApplyError(BadInputError):
    """A patch does not apply, on its own and without fuzz, to the pristine pinned tag."""

    default_hint = "the patch must apply to the pristine pinned tag on its own; re-export it (docs/maintainers.md)"


class MissingUpstreamTestError(BadInputError):
    """A patch's `Upstream-Test:` names a test whose file is not in patches/upstream-tests/ (or is no test path)."""

    default_hint = (
        "keep the test at patches/upstream-tests/<its path in vLLM> and name that path, `tests/...py`, "
        'in the trailer (docs/maintainers.md, "Send a patch upstream")'
    )


class UnprovenUpstreamTestError(ReleaseError):
    """The regression test did not fail without the patch, or did not pass with it: it proves nothing yet."""

    default_hint = (
        "fix the test under patches/upstream-tests/ (or the patch) and run again; `--skip-test-run` writes the PR "
        "with a warning that the test was not run"
    )


class NoPytestError(ToolMissingError):
    """The interpreter `upstream-pr --python` or `publish --python` names has no pytest: the regression test
    cannot run there."""

    default_hint = (
        "leave --python out of `publish` and `evidence` (the tool makes each release line's proving environment), "
        "run `nox -s upstream_pr -- PATCH`, which makes a venv with pytest, torch and what vLLM imports, or give "
        "--python such an interpreter"
    )


class CloneError(BadInputError):
    """`--vllm PATH` is not a usable vLLM clone (not git, or without the pinned tag)."""

    default_hint = "--vllm takes a clone of https://github.com/vllm-project/vllm with the pinned tag fetched"


class DirtyCloneError(BadInputError):
    """The vLLM clone has uncommitted changes that a new branch would carry along."""

    default_hint = "commit, stash or discard the changes in the clone first (`git -C PATH status`)"


class BranchExistsError(BadInputError):
    """The PR branch already exists in the clone; it is never overwritten."""

    default_hint = "delete it (`git -C PATH branch -D BRANCH`) to regenerate it, or push the one you have"


class RemoteError(TransportError):
    """`git ls-remote` could not list the remote's tags (network, URL, authentication)."""

    default_hint = "check the URL and the network; `git ls-remote --tags URL` shows git's own message"


class BadTagError(BadInputError):
    """A pin given to `tags` is not a final vLLM release tag."""

    default_hint = "a release tag looks like v0.21.0 or v0.21.0.post1"


class BuildError(ReleaseError):
    """The PEP 517 build itself failed."""

    default_hint = "run the printed command by hand in the staging directory to see the backend's output"


class TagsNotBuiltError(ReleaseError):
    """`build --all` built every train tag it could, and not these (each named with its reason)."""

    default_hint = (
        "the wheels that were built are in --out; fix each reason, or build the others alone: "
        "`python -m release build --tag TAG` (repeatable)"
    )

    def __init__(self, message: str, hint: str | None = None, built: tuple[object, ...] = ()) -> None:
        super().__init__(message, hint)
        self.built = built  # the BuildResults of the wheels that were delivered, for the report before the error


class BadPatchLevelError(BadInputError):
    """`build --patch-level` is not a positive integer, or below the level the train records (or at it, other files)."""

    default_hint = "--patch-level is a positive integer; raise it whenever a release changes the wheel's contents"


class DataNotFoundError(BadInputError):
    """The GSM8K data files are not where --data (or the default) says."""

    default_hint = "pass --data DIR holding test.jsonl and train.jsonl (CI keeps them in ../shared/data/gsm8k/)"


class MalformedDataError(BadInputError):
    """A GSM8K jsonl line is not a question/answer object."""

    default_hint = 'each line must be a JSON object {"question": ..., "answer": "... #### N"}'


class NoGpuError(BadInputError):
    """gsm8k would install and serve vLLM on a machine where no NVIDIA GPU answers."""

    default_hint = (
        "run it on a machine with NVIDIA GPUs (the nvlink runners: docs/gsm8k.md); `nvidia-smi -L` must list them"
    )


class InstallError(InfrastructureError):
    """Installing vLLM or the overlay into a serving venv failed."""

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


class CompletionRequestError(TransportError):
    """A completions request kept failing after its retries."""

    default_hint = "the server answered with errors; read its log in the report directory"


class LmEvalError(InfrastructureError):
    """lm-eval is missing, failed, or wrote no GSM8K result."""

    default_hint = "run with --scorer builtin to score from the local data copy instead"


class BadWheelError(BadInputError):
    """`publish` was given something that is not a well-formed wheel."""

    default_hint = "publish only wheels built by `python -m release build` or downloaded from a package index"


class IndexClashError(BadInputError):
    """A wheel of that name, with other bytes, is already in the index."""

    default_hint = (
        "a published file is never replaced: `python -m release build` raises the level of a tag whose files "
        "changed and records it in patches/train.toml; for an index that holds a level this checkout never "
        "recorded, `build --tag TAG --patch-level N` with N above it records N there too"
    )


class DirtyWheelError(BadInputError):
    """`publish` was given a build of a tree that was not its commit (`build --allow-dirty`)."""

    default_hint = (
        "commit, build again and publish that wheel; `publish --allow-dirty` only for an index no user "
        "installs from (the requirements file would pin the dirty build as the newest patch level)"
    )


class ForeignProjectError(BadInputError):
    """`publish` was given a wheel of another project, or the index already holds one."""

    default_hint = (
        "our index holds vllm-fused-moe only: a wheel of another project there (vllm, flashinfer-python) "
        "could be installed in place of the real one by whoever points pip at the index"
    )


class IndexNotWritableError(BadInputError):
    """The index directory (or its parent) cannot be written."""

    default_hint = "publish into a directory you may write (the index was left as it was)"


class IndexCorruptError(BadInputError):
    """The index holds leftovers of an interrupted publish or files it does not list."""

    default_hint = "compare simple/<project>/ with its index.html, remove what it does not list, publish again"


class PublishError(ReleaseError):
    """Writing into the index failed midway; what was written is rolled back."""

    default_hint = "the index was restored to what it was before; check the disk and publish again"


class ServerClashError(BadInputError):
    """`publish --to`: the index server already holds a file of that name with other bytes (or lists no sha256)."""

    default_hint = (
        "a file an index server holds is never replaced (pip caches it under its name): build the tag at a "
        "higher patch level (`python -m release build --tag TAG --patch-level N`) and publish that; nothing "
        "was uploaded"
    )


class UploadError(TransportError):
    """`publish --to`: the index server refused an upload, or holds other bytes than those uploaded."""

    default_hint = (
        "check the URL and the credentials (TWINE_USERNAME/TWINE_PASSWORD, keyring or ~/.pypirc; never "
        "printed); what the server holds now is what its simple page lists, and a rerun uploads only the rest"
    )


class SigningKeyError(BadInputError):
    """The ed25519 key given to sign the evidence (`--signing-key`, VLLM_FUSED_MOE_SIGNING_KEY) is unusable."""

    default_hint = (
        "give an unencrypted PEM (PKCS#8) ed25519 private key: `python -m release signing-key --generate FILE` "
        "writes one, `openssl genpkey -algorithm ed25519` too"
    )


class AttestationError(BadInputError):
    """An evidence file that publish would sign is not the evidence of its wheel."""

    default_hint = "remove INDEX_DIR/evidence/<wheel>.json and publish again: the evidence is computed anew"


class WheelIntegrityError(BadInputError):
    """A release wheel (from the index or a local file) is not what its RECORD or the index says."""

    default_hint = (
        "the wheel's bytes differ from its RECORD or from the index's sha256; nothing was used. "
        "Retry (a cached copy is re-read), or pass --from git+URL to read the tag from git instead"
    )


class PackageIndexError(TransportError):
    """The package index could not be read (network, URL, or an answer we cannot parse): a transport failure."""

    default_hint = (
        "check the network to the package index, or set VLLM_FUSED_MOE_INDEX_URL to a PEP 503/691 simple index; "
        "a wheel whose index entry is in the cache is read offline. Waits: VLLM_FUSED_MOE_HTTP_TIMEOUT, "
        "VLLM_FUSED_MOE_HTTP_DEADLINE, VLLM_FUSED_MOE_HTTP_RETRIES (docs/guarantees.md)"
    )


class UnsafeIndexError(BadInputError):
    """The package index names a file that is not a plain, canonical wheel file name of the release asked for."""

    default_hint = (
        "a name from an index must be a base name (no `/`, `..`, `\\`) and the canonical wheel file name of "
        "that vLLM release (vllm-VERSION[-BUILD]-PY-ABI-PLATFORM.whl); nothing was written or recorded. "
        "The index (or a mirror or proxy in front of it) is not to be trusted: use another one"
    )


class UnverifiedFlashInferError(BadInputError):
    """A tag's own FlashInfer pin admits none of the versions in VERIFIED.toml."""

    reference = "unverified-flashinfer"  # the project's one word, not "flash-infer"

    default_hint = (
        "verify that version first (docs/contract.md: the CPU contract, then `nox -s kernel` on a GPU) and add it "
        "to vendor/vllm_fused_moe/VERIFIED.toml; `python -m release train list` shows each tag's range"
    )


class UnknownTrainTagError(BadInputError):
    """`train remove` or `train check` names a tag that is not in the train."""

    default_hint = "`python -m release train list` names the tags of the train; `train add TAG` adds one"


class TrainRefusedError(BadInputError):
    """`train add`: the series does not replay on the tag as it stands; the train is unchanged."""

    default_hint = (
        "a conflicting patch needs a release line of its own (docs/patch-queue.md); a fix already upstream "
        "needs no overlay for that tag"
    )


class TrainDriftError(ReleaseError):
    """`train check`: a tag does not reproduce what patches/train.toml records for it."""

    default_hint = (
        "recorded hashes change only through `python -m release train add TAG` (it re-records the tag); "
        "an edit to patches/ that was meant goes with re-recording every tag (docs/patch-queue.md)"
    )


class PatchQueueTreeError(BadInputError):
    """`pq`: the work tree is missing, is not one `pq import` made, holds work not exported, or its commits
    cannot become patches (a merge, an empty commit, a name used twice, a line's patch dropped)."""

    default_hint = 'the loop step by step: docs/patch-queue.md, "Add a patch"; `python -m release pq --help`'


class PatchQueueStaleError(ReleaseError):
    """`pq export --check`: patches/ or vendor/ is not what the work tree's commits export."""

    default_hint = (
        "`python -m release pq export` writes them; a patch made by hand (another git, other flags) is "
        "rewritten once that way and then stays byte for byte"
    )


class DoctorError(BadInputError):
    """`release doctor` got no report from the interpreter it asked: exit 2, the doctor's "cannot tell"."""

    default_hint = (
        "--python must be a Python 3.10+ interpreter of the environment to check (e.g. /opt/venv/bin/python); "
        "run it with release/overlay/runtime/vllm_fused_moe/doctor.py by hand to see its own error"
    )


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
    """`rebase --continue/--abort` names no rebase work directory, or one without a usable state."""

    default_hint = "the conflict report names the work directory; `python -m release rebase --abort DIR` drops any"


class OlderTagError(BadInputError):
    """`rebase` onto a tag older than the head would move vendor/ and the head of the train backwards."""

    default_hint = (
        "pass --allow-older to move the head back on purpose (the report says so); `python -m release train "
        "add TAG` ships an older release without moving the head"
    )


class JournalError(ReleaseError):
    """An interrupted swap cannot be finished by itself."""

    default_hint = "docs/guarantees.md says how to finish or undo an interrupted swap by hand"


class AfterSwapError(ReleaseError):
    """The tree changed as asked, then something after the swap failed."""

    default_hint = "the change itself is complete (`python -m release check` agrees); only this last step failed"


class DirtyTreeError(BadInputError):
    """`build` was asked to ship a tree that is not what its version and commit say (no --allow-dirty)."""

    default_hint = (
        "commit or discard the changes (`python -m release check`, `git status vendor/ patches/`), or pass "
        "--allow-dirty to build a wheel whose version and build info say it is dirty"
    )


class DiskError(ReleaseError):
    """The operating system refused a read or a write (disk full, read-only, gone) that no kind above names:
    the last net under every command (release/cli.py), one line, never a traceback."""

    default_hint = (
        "free space there (or make it writable) and run the command again: what a command cut short leaves, "
        "its next run finishes or removes (docs/guarantees.md, 'Leftovers and their way out')"
    )

    @classmethod
    def of(cls, exc: OSError) -> DiskError:
        """The error of `exc`, naming its file; where that file is in the temporary directory, TMPDIR is named."""
        where = f" ({exc.filename})" if exc.filename else ""
        scratch = tempfile.gettempdir()
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        if full and exc.filename and Path(str(exc.filename)).absolute().is_relative_to(scratch):
            hint = (
                f"the temporary directory {scratch} (TMPDIR) is full: free space there, or point TMPDIR at a disk "
                "with room, and run the command again (docs/guarantees.md, 'Leftovers and their way out')"
            )
            return cls(f"{exc.strerror or exc}{where}", hint)
        return cls(f"{exc.strerror or exc}{where}")


class OutputNotWritableError(BadInputError):
    """An output (the report, --out, the lock's directory) cannot be written; checked before any change."""

    default_hint = "name a directory you may write (it is created if missing)"


class UndeclaredExitError(ReleaseError):
    """A command raised a kind whose exit code its `--help` does not declare (release/cli.py `COMMANDS`): a bug of
    the tool. The CLI edge reports it as this kind, exit 1 (every command's "failed"), naming the kind it caught,
    so a code never means what the command's table does not say."""

    default_hint = "a bug of the tool, not of your input: report this line; the error it names says what went wrong"


def kinds() -> list[type[ReleaseError]]:
    """Every kind of failure this module defines, in its order (families first, each before its kinds)."""
    order = {name: number for number, name in enumerate(globals())}
    found: list[type[ReleaseError]] = []
    pending: list[type[ReleaseError]] = [ReleaseError]
    while pending:
        kind = pending.pop(0)
        if kind not in found and kind.__module__ == __name__:  # a double made in a test is no kind of ours
            found.append(kind)
            pending.extend(kind.__subclasses__())
    return sorted(found, key=lambda kind: order[kind.__name__])


def reference_table() -> str:
    """The Markdown table of every error reference, its exit code and when it is raised (docs/architecture.md)."""
    rows = ["| reference | exit | raised when |", "| --- | --- | --- |"]
    for kind in kinds():
        when = " ".join((kind.__doc__ or "").split()).replace("|", "\\|")
        rows.append(f"| `{kind.reference}` | {kind.exit_code} | {when} |")
    return "\n".join(rows) + "\n"
