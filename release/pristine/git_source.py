"""`git:PATH` and `git+URL`: only the tag, only the subtree's blobs."""

from __future__ import annotations

import tempfile
from pathlib import Path

from release.core.errors import SourceError, UnknownTagError
from release.core.git import files_at, git, ls_tree
from release.core.layout import UPSTREAM_SUBTREE
from release.pristine import safe
from release.pristine.tree import UpstreamTree, _flashinfer_pin
from release.queue.lines import Line


def read_git(tag: str, url_or_path: str, source: str, line: Line | None = None) -> UpstreamTree:
    """Fetch just `tag` (depth 1, no blobs until asked) and read only the subtree's blobs."""
    local = Path(url_or_path)
    if not source.startswith("git+") and not (local / ".git").exists() and not (local / "HEAD").is_file():
        raise SourceError(f"{url_or_path} is not a git repository")
    url = str(local.resolve()) if not source.startswith("git+") else url_or_path
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-git-") as tmp:
        repo = Path(tmp)
        git("init", "--quiet", "--bare", str(repo))
        fetched = git("fetch", "--quiet", "--depth", "1", "--filter=blob:none", "--no-tags", url,
                      f"refs/tags/{tag}:refs/tags/{tag}", cwd=repo, check=False)  # fmt: skip
        if not fetched.ok:
            if "couldn't find remote ref" in fetched.err or "not our ref" in fetched.err:
                raise UnknownTagError(f"{source} has no tag {tag}")
            raise SourceError(f"cannot fetch {tag} from {source}: {fetched.message[-300:]}")
        # The tag, fetched by its exact name, is this source's proof of the version.
        commit = git("rev-parse", f"refs/tags/{tag}^{{commit}}", cwd=repo).out.strip()
        root = line.root if line else UPSTREAM_SUBTREE
        safe.check_git_entries(ls_tree(repo, commit, root), source)
        files = files_at(repo, commit, root)
        if line is not None:
            files = line.relative({f"{root}/{name}": data for name, data in files.items()})
        if not files:
            raise SourceError(f"{source} at {tag} has no {root}/")
        cuda = git("show", f"{commit}:requirements/cuda.txt", cwd=repo, check=False)
        pin = _flashinfer_pin(cuda.out) if cuda.ok else ""
    return UpstreamTree(tag=tag, source=source, files=files, flashinfer=pin, commit=commit)
