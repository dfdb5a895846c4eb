"""The ways `upstream-pr` refuses; each is bad input (exit 2) and nothing is changed."""

from __future__ import annotations

from release.errors import BadInputError


class UnknownPatchError(BadInputError):
    default_hint = "name a patch by path, by file name in patches/, or by its number (`0001`); `python -m release status` lists them"


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
