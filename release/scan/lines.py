"""The release lines live with the patch queue (release/queue/lines.py); the scan reads them from there."""

from release.queue.lines import Line, load_lines

__all__ = ["Line", "load_lines"]
