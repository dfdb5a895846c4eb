"""`git:PATH` and `git+URL`: only the tag, only the subtree's blobs."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from release.core.errors import GitError, SourceError, TransportError, UnknownTagError
from release.core.git import files_at, git, ls_tree
from release.core.layout import UPSTREAM_SUBTREE
from release.model.lines import Line
from release.model.source import Source, SourceKind
from release.model.tree import UpstreamTree
from release.pristine import safe, transport
from release.pristine.metadata import requirements_file_pin

# What git says when the network, not the source, failed (git's own wording, from http.c, connect.c, transport.c).
NETWORK_FAILURE_RE = re.compile(
    r"Could not resolve host|Connection refused|Connection timed out|Operation timed out|unable to access|"
    r"RPC failed|early EOF|the remote end hung up|Failed to connect|SSL_ERROR|gnutls_handshake|HTTP 5\d\d|"
    r"returned error: 5\d\d|returned error: 429",
    re.I,
)


def read_git(tag: str, origin: Source, line: Line | None = None) -> UpstreamTree:
    """Fetch just `tag` (depth 1, no blobs until asked) and read only the subtree's blobs."""
    source = str(origin)
    local = Path(origin.location)
    remote = origin.kind is SourceKind.GIT_URL
    if not remote and not (local / ".git").exists() and not (local / "HEAD").is_file():
        raise SourceError(f"{origin.location} is not a git repository")
    url = origin.location if remote else str(local.resolve())
    with tempfile.TemporaryDirectory(prefix="vllm-fused-moe-git-") as tmp:
        repo = Path(tmp)
        git("init", "--quiet", "--bare", str(repo))
        try:
            # The same deadline as every network read: a remote that stalls must not hang the command.
            fetched = git("fetch", "--quiet", "--depth", "1", "--filter=blob:none", "--no-tags", url,
                          f"refs/tags/{tag}:refs/tags/{tag}", cwd=repo, check=False,
                          timeout=transport.settings().deadline)  # fmt: skip
        except GitError as exc:  # it did not finish in time
            raise TransportError(f"cannot fetch {tag} from {source}: {exc}") from None
        if not fetched.ok:
            if "couldn't find remote ref" in fetched.err or "not our ref" in fetched.err:
                raise UnknownTagError(tag=tag, source=source)
            if NETWORK_FAILURE_RE.search(fetched.err):
                raise TransportError(f"cannot fetch {tag} from {source}: {fetched.message[-300:]}")
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
        pin = requirements_file_pin(cuda.out) if cuda.ok else ""
    return UpstreamTree(tag=tag, source=source, files=files, flashinfer=pin, commit=commit)
