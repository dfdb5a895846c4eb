"""The same wheel built without one bug's patch: the third run of each bug's test (release/evidence/gather.py).

Pristine fails and the wheel passes shows that the test tells the two runs apart, not that the fix is why:
a test can tell them by how the runs are set up (the pristine run has our hook off) or by anything else
the wheel brings. So the tool builds the wheel again from the tree it was built from (the commit's
checkout, or this checkout's tree: release/overlay/rebuild.py `References`), at its tag and patch level,
with the tag's series less every patch that fixes the bug (the common patch or the line's variant), replayed
on the tag's pristine release and built by the one build code path (build.py `build_target`); the test
must fail cleanly on it. A later patch stacked on the fix, which does not apply without it, leaves with it.
Where the series carries no patch for the bug, that wheel is the wheel itself.

Each such wheel is kept under the cache (`<cache>/without/<key>/<the wheel's name>`, the key the wheel's
sha256, the bug and the digest of the tool's code): the wheel was proven to be the build of its tree, so its
bytes fix every input of the build without the patch. Its sealed record (release/core/seal.py) names the kept
wheel's sha256, which is checked on every read; anything else is built again.
"""

from __future__ import annotations

import json
import tempfile
import threading
from contextlib import ExitStack
from pathlib import Path

from release.core.errors import ReleaseError
from release.core.hashing import file_sha256
from release.core.journal import copy_atomic, write_atomic
from release.core.layout import Layout
from release.core.seal import sealed
from release.evidence.cache import cache_root, key_of, read_entry, trusted
from release.model.lines import Line
from release.model.outcome import PatchStatus
from release.model.patch import Patch
from release.model.pin import Pin
from release.overlay.backend import Backend, Isolation, use_isolation
from release.overlay.make import build_target
from release.overlay.rebuild import Origin, References
from release.overlay.target import BuildPlan, BuildTarget
from release.pristine.sources import fetch
from release.queue.load import is_head
from release.queue.regression import BugTest
from release.queue.replay_cache import tool_digest
from release.queue.snapshot import Checkout
from release.train.replay import line_made_on, replay_tag


class Without:
    """Builds, for one publish, each wheel without a bug's patch (kept until the publish ends)."""

    def __init__(self, references: References, origins: dict[str, Origin], stack: ExitStack) -> None:
        self.references = references
        self.origins = origins
        self.scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vllm-fused-moe-without-")))
        self.count = 0
        self._stack = stack
        # One backend process per epoch for the whole publish (hatchling's start and imports once, not per wheel):
        # the worker's environment carries SOURCE_DATE_EPOCH, so wheels of another epoch need their own.
        self._backends: dict[int, Backend] = {}
        # gather_all proves several wheels at once, in threads: one build at a time (each is a few seconds, and
        # they share the scratch directory, the tree checked out per commit and the backend's build directory).
        self._lock = threading.Lock()

    def __call__(self, wheel: Path, test: BugTest) -> tuple[Path | None, str]:
        made = self.origins.get(wheel.name)
        if made is None:
            return None, f"{wheel.name} was not proven to be a build of this checkout"
        inputs = ("without", file_sha256(wheel), test.bug, tool_digest())
        key = key_of(*inputs)
        directory = cache_root() / "without"
        kept = directory / key / wheel.name  # pip installs a wheel by its name: the same as the wheel's
        stored = read_entry(directory / f"{key}.json")
        if stored is not None and trusted(stored, key):
            if stored.get("same"):
                return wheel, ""
            if kept.is_file() and file_sha256(kept) == stored.get("sha256"):
                return kept, ""
        try:
            with self._lock:
                built, problem = self._build(made, test)
        except ReleaseError as exc:
            return None, f"the build of {made.tag} without the fix of {test.bug} failed: {exc}"
        if built is None:
            return None, problem
        directory.mkdir(parents=True, exist_ok=True)
        record = {"key": key, "inputs": list(inputs), "same": built == wheel, "sha256": file_sha256(built)}
        if built != wheel:
            kept.parent.mkdir(parents=True, exist_ok=True)
            copy_atomic(built, kept)
        write_atomic(directory / f"{key}.json", (json.dumps(sealed(cache_root(), record)) + "\n").encode())
        return built, ""

    def _build(self, made: Origin, test: BugTest) -> tuple[Path | None, str]:
        layout = Layout(self.references.root(made.commit))
        checkout = Checkout.load(layout)
        entry = checkout.require_train().get(made.tag)
        if entry is None:
            return None, f"{made.tag} is not in the train at {made.where}"
        line = checkout.line(entry.line)
        series = checkout.tag_patches(line, made.tag)
        kept = [p for p in series if p.purpose.bug != test.bug]
        if len(kept) == len(series):
            return made.wheel, ""  # it carries no patch for the bug: without it, it is the wheel itself
        head = is_head(layout, line)
        upstream = fetch(made.tag, entry.recorded_source(), None if head else line, lazy=True)
        base = checkout.drift()[1] if head else line_made_on(checkout.require_train(), line, "")
        replay = replay_tag(upstream, base, kept, line.root)
        while replay.conflict:
            # A later patch stacked on the fix (its context is the fix's lines) cannot apply without it: it leaves
            # with the fix, as `git rebase --onto` would stop there. Each replay is the replay cache's.
            stacked = next(o.name for o in replay.outcomes if o.status == PatchStatus.CONFLICT)
            kept = [p for p in kept if p.name != stacked]
            replay = replay_tag(upstream, base, kept, line.root)
        applied = tuple(p for p in kept if p.name in replay.applied)
        return self._wheel(
            layout, made, entry.pin(line.root), replay.files, line, applied, checkout.series_text(line)
        ), ""

    def _wheel(
        self,
        layout: Layout,
        made: Origin,
        pin: Pin,
        files: dict[str, bytes],
        line: Line,
        patches: tuple[Patch, ...],
        series: str,
    ) -> Path:
        self.count += 1
        scratch = self.scratch / str(self.count)
        flashinfer = str(made.info.get("flashinfer_specifier") or "")
        # The wheel's own level (its version), no train entry: nothing is recorded, and the version is the wheel's.
        plan = BuildPlan(layout, scratch / "out", patch_level=made.level)
        target = BuildTarget(pin, flashinfer, line, patches, series, files)
        backend = self._backends.get(made.epoch)
        if backend is None:
            backend = self._stack.enter_context(Backend(use_isolation(Isolation.AUTO), made.epoch))
            self._backends[made.epoch] = backend
        return build_target(plan, target, scratch, [], backend).wheel
