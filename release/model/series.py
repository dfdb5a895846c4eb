"""patches/series: the order of the queue, comments kept."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from release.core.errors import MalformedSeriesError

# ------------------------------------------------------------------------ series


@dataclass(frozen=True)
class Series:
    """patches/series: the order of the queue. Comments and blank lines survive a rewrite."""

    lines: tuple[str, ...]

    @classmethod
    def load(cls, path: Path, common: Path | None = None) -> Series:
        """`common`: where a line's series (patches/lines/<line>/series) finds the patches it shares."""
        if path.parent.exists() and not path.parent.is_dir():
            raise MalformedSeriesError(f"{path.parent} is not a directory", hint="restore patches/ from git")
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise MalformedSeriesError(f"{path} is missing") from None
        except UnicodeDecodeError:
            raise MalformedSeriesError(f"{path} is not UTF-8 text") from None
        except OSError as exc:
            raise MalformedSeriesError(f"{path} cannot be read as a file ({exc.strerror})") from None
        series = cls(tuple(text.splitlines()))
        seen: set[str] = set()
        for name in series.names:
            if "/" in name or not name.endswith(".patch"):
                raise MalformedSeriesError(f"{path}: {name!r} is not a patch file name in patches/")
            if name in seen:
                raise MalformedSeriesError(f"{path}: {name!r} is listed twice")
            seen.add(name)
            if not (path.parent / name).is_file() and not (common is not None and (common / name).is_file()):
                where = f"{path.parent}" + (f" nor {common}" if common is not None else "")
                raise MalformedSeriesError(f"{path} names {name!r}, which is not in {where}")
        return series

    @property
    def names(self) -> list[str]:
        return [entry for entry in (_series_entry(line) for line in self.lines) if entry]

    def without(self, name: str) -> Series:
        return Series(tuple(line for line in self.lines if _series_entry(line) != name))

    def dumps(self) -> str:
        return "\n".join(self.lines) + "\n" if self.lines else ""


def _series_entry(line: str) -> str:
    return line.split("#", 1)[0].strip()
