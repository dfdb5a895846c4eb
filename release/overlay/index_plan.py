"""What a publish adds, before anything is written: new wheels go in; the same bytes are already there; the same
files (apart from build information) are skipped, as `twine upload --skip-existing` skips; other files at or
below the newest patch level the index holds for their vLLM release are refused (its requirements file pins
the newest, so a lower level would never reach a user)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from release.core.errors import DirtyWheelError, ForeignProjectError, IndexClashError, PatchLevelNotAboveError
from release.model.wheel import OverlayWheel
from release.overlay.pages import TMP_PREFIX
from release.overlay.wheel import WheelReads, is_dirty


@dataclass(frozen=True)
class Skipped:
    name: str  # the wheel given
    held: str  # the wheel of the index with the same files
    same_name: bool  # a rebuild of that very release (else: another patch level of the same files)

    def reason(self) -> str:
        what = "a rebuild of it" if self.same_name else "a new patch level that changes nothing"
        return (
            f"the index already holds {self.held} for the same patched files; only build information "
            f"differs (commit, build time{'' if self.same_name else ', version label'}), so {what} is not published"
        )


@dataclass(frozen=True)
class Plan:
    added: list[OverlayWheel]
    already: list[OverlayWheel]
    skipped: list[Skipped]


def preflight(
    wheels: list[Path], index: Path, *, project: str, allow_dirty: bool = False, reads: WheelReads | None = None
) -> list[OverlayWheel]:
    """The wheels a publish would add, after every check it makes before writing (readable wheels of
    `project`, no dirty build unless `allow_dirty`, no clash, the patch level going up); nothing is written.

    The command gathers evidence for these alone: a wheel the index already holds (the same bytes, or
    the same files) adds nothing, and a wheel that would be refused anyway is refused first, cheaply.
    `reads`: the wheels the command has read (None: none yet), which the publish that follows reads from.
    """
    reads = reads if reads is not None else WheelReads()
    candidates = read_candidates(wheels, project, allow_dirty, reads)
    return plan_wheels(candidates, index / "simple", project, reads).added


def read_candidates(
    wheels: list[Path], project: str | None, allow_dirty: bool, reads: WheelReads
) -> list[OverlayWheel]:
    candidates = [reads(path) for path in wheels]
    if project is not None:
        for wheel in candidates:
            if wheel.project != project:
                raise ForeignProjectError(
                    f"{wheel.name} is a wheel of {wheel.project}, not of {project}; nothing was published"
                )
            if is_dirty(wheel.version) and not allow_dirty:
                raise DirtyWheelError(
                    f"{wheel.name} is a dirty build (its tree was not its commit; _build_info.json says why); "
                    "nothing was published"
                )
    return candidates


def plan_wheels(candidates: list[OverlayWheel], simple: Path, project: str | None, reads: WheelReads) -> Plan:
    """What goes in: new wheels; what does not: the same bytes (already), the same files (skipped).

    Files are compared only for the command (`project` given, so every wheel is ours): the build
    information it leaves out is ours to read.
    """
    added: dict[str, OverlayWheel] = {}
    already: list[OverlayWheel] = []
    skipped: list[Skipped] = []
    for wheel in sorted(candidates, key=lambda w: (w.project, w.version, w.name)):
        existing = simple / wheel.project / wheel.name
        if existing.exists():
            if reads(existing).sha256 == wheel.sha256:
                already.append(wheel)
            elif project is not None and wheel.shipped == reads(existing).shipped:
                skipped.append(Skipped(wheel.name, wheel.name, same_name=True))
            else:
                raise IndexClashError(
                    f"{existing} is already published with different bytes than {wheel.path}; nothing was published"
                )
        elif wheel.name in added:
            if added[wheel.name].sha256 != wheel.sha256:
                raise IndexClashError(f"two different wheels named {wheel.name} were given; nothing was published")
        else:
            held = _newest_held(wheel, simple, list(added.values()), reads) if project is not None else None
            if held is not None and wheel.shipped == held.shipped:
                skipped.append(Skipped(wheel.name, held.name, same_name=False))
            elif held is not None and wheel.version <= held.version:
                # Its requirements file would keep pinning the newest: users would never get this one.
                raise PatchLevelNotAboveError(
                    f"{wheel.name} is at or below {held.name}, the newest the index holds for vLLM {wheel.vllm}, "
                    "and its files differ: a tag's patch level only goes up; nothing was published"
                )
            else:
                added[wheel.name] = wheel
    return Plan(list(added.values()), already, skipped)


def _newest_held(
    wheel: OverlayWheel, simple: Path, planned: list[OverlayWheel], reads: WheelReads
) -> OverlayWheel | None:
    """The newest wheel the index holds (or this publish adds) for the same vLLM release as `wheel`.

    Only the newest counts: a change that is reverted (fm.1 = fm.3 != fm.2) is a new release.
    """
    project_dir = simple / wheel.project
    held = [w for w in planned if w.project == wheel.project]
    if project_dir.is_dir():
        held += [reads(p) for p in project_dir.glob("*.whl") if not p.name.startswith(TMP_PREFIX)]
    same = [w for w in held if w.vllm == wheel.vllm]
    return max(same, key=lambda w: (w.version, w.name)) if same else None
