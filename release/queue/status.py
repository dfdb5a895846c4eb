"""`check` and `status`: is vendor/ what the pin and the series say, and what do we carry."""

from __future__ import annotations

from release.core.layout import Layout
from release.model.patch import Patch
from release.queue.drift import Drift, drift
from release.queue.load import Queue, require_accounted


def check(layout: Layout) -> list[Drift]:
    """How vendor/ differs from pristine + series; first, a release line silent about a common patch is refused."""
    queue = Queue.load(layout)
    require_accounted(layout, queue)
    found, _ = drift(layout, queue)
    return found


def status_lines(layout: Layout) -> list[str]:
    queue = Queue.load(layout)
    pin = queue.pin
    where = (
        (pin.wheel and f"wheel {pin.wheel} (sha256 {pin.wheel_sha256[:12]}…)")
        or (pin.commit and f"commit {pin.commit[:12]}")
        or ""
    )
    lines = [
        f"pinned: vLLM {pin.tag} from {pin.source}" + (f", {where}" if where else ""),
        f"upstream FlashInfer pin: {pin.flashinfer or 'unknown'}",
        f"patches in series ({len(queue.patches)}):",
    ]
    found = {d.path for d in drift(layout, queue)[0]}
    for patch in queue.patches:
        touched = [p.rsplit("/", 1)[-1] for p in patch.files]
        state = "drifted" if any(t in found for t in touched) else "applied"
        lines.append(f"  {patch.name}: {state}; {patch.subject}")
        origin = patch.trailers.get("Origin")
        if origin:
            lines.append(f"      Origin: {origin}")
    retired = sorted(layout.retired.glob("*.patch")) if layout.retired.is_dir() else []
    lines.append(f"retired patches ({len(retired)}):")
    for path in retired:
        patch = Patch.load(path)
        lines.append(f"  {patch.name}: upstream since {patch.trailers.get('Applied-Upstream', '?')}; {patch.subject}")
    lines.append(
        "vendor/: " + ("clean" if not found else f"{len(found)} file(s) drifted, run `python -m release check`")
    )
    return lines
