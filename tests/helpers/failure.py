"""A command's failure as a test reads it: the reference, message and hint of its error line.

Every failure of `python -m release` is one `error[REFERENCE]: MESSAGE` line and, where the kind has
one, one `hint: HINT` line after it (release/cli.py, `report`). A test asserts the reference, the kind
of the failure, rather than a piece of its wording:

    assert failed(result).reference == MissingFixError.reference and result.returncode == 2

`failed` takes a CompletedProcess (its stderr) or the text itself (capsys); `shown` is the pair of
lines with temp paths and times filtered out (as uv's `uv_snapshot!` filters them), for a test whose
point is the whole wording. The runtime's own `python -m vllm_fused_moe` prints `error: ` lines
without a reference: they parse with reference "".
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ERROR_RE = re.compile(r"error(?:\[(?P<reference>[a-z0-9-]+)\])?: (?P<message>.*)")
HINT_PREFIX = "hint: "
# 0.2 s, 12 ms, 3s: a duration the run measured; an ISO time stamp.
TIME_RE = re.compile(r"\b\d+(?:\.\d+)?\s?m?s\b|\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


@dataclass(frozen=True)
class Failure:
    reference: str
    message: str
    hint: str
    filters: tuple[tuple[str, str], ...] = ()

    @property
    def shown(self) -> str:
        """`error[REFERENCE]: MESSAGE` (and `hint: HINT`) with temp paths as [TMP] and times as [TIME]."""
        text = f"error[{self.reference}]: {self.message}" + (f"\n{HINT_PREFIX}{self.hint}" if self.hint else "")
        for path, name in self.filters:
            text = text.replace(path, name)
        return TIME_RE.sub("[TIME]", text)


def stderr_of(said: subprocess.CompletedProcess[str] | str) -> str:
    return said if isinstance(said, str) else str(said.stderr)


def temp_filters(*paths: Path) -> tuple[tuple[str, str], ...]:
    """(text, what it becomes): the paths a test names as [TMP] (the first), [TMP1], ..., then the temp
    directory itself as [TEMPDIR]; each spelled as given and resolved, the longest first."""
    pairs: dict[str, str] = {}
    for number, path in enumerate(paths):
        for spelling in (str(path), str(path.resolve())):
            pairs.setdefault(spelling, "[TMP]" if number == 0 else f"[TMP{number}]")
    for spelling in (tempfile.gettempdir(), str(Path(tempfile.gettempdir()).resolve())):
        pairs.setdefault(spelling, "[TEMPDIR]")
    return tuple(sorted(pairs.items(), key=lambda pair: -len(pair[0])))


def failures(said: subprocess.CompletedProcess[str] | str, *tmp: Path) -> list[Failure]:
    """Every error line of `said`, each with the hint line right after it ("" where none follows)."""
    lines = stderr_of(said).splitlines()
    found = []
    for number, line in enumerate(lines):
        match = ERROR_RE.fullmatch(line)
        if match:
            following = lines[number + 1] if number + 1 < len(lines) else ""
            hint = following.removeprefix(HINT_PREFIX) if following.startswith(HINT_PREFIX) else ""
            found.append(Failure(match["reference"] or "", match["message"], hint, temp_filters(*tmp)))
    return found


def failed(said: subprocess.CompletedProcess[str] | str, *tmp: Path) -> Failure:
    """The one error of `said` (asserting there is exactly one); `tmp`: paths `shown` writes as [TMP], [TMP1], ..."""
    found = failures(said, *tmp)
    assert len(found) == 1, f"expected one error line, found {len(found)}:\n{stderr_of(said)}"
    return found[0]
