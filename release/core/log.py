"""What the tool says, and where: a command's result on stdout, everything else through `logging`.

stdout holds what a command produces (a report, a list, JSON, the paths it wrote), so a script
that reads it is never disturbed by progress. Everything else is a diagnostic on stderr, through
the `release` logger, at one of three levels:

- DEBUG, shown with `-v`: what the tool does underneath (each git command, each index page read);
- INFO, shown by default: what a person follows a run by (notes, progress, where a report went);
- WARNING, shown even with `-q`: what may need doing (a cached file was corrupt, a train tag will
  fail its check), and the `error:`/`hint:` lines of a failed command (release/cli.py).

A diagnostic is printed as it is given, one line, no level or time prefix: the messages already
say `note:` or `error:` where that helps, and tests and users read them as they stand.
"""

from __future__ import annotations

import logging
import sys

LOGGER = logging.getLogger("release")
QUIET, DEFAULT, VERBOSE = -1, 0, 1
_LEVELS = {QUIET: logging.WARNING, DEFAULT: logging.INFO, VERBOSE: logging.DEBUG}


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """sys.stderr as it is when a record is emitted, not when the handler was made.

    Tests capture stderr by replacing sys.stderr (pytest's capsys); a handler holding the stream
    of import time would write past them.
    """

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def _install() -> None:
    if any(isinstance(handler, _Stderr) for handler in LOGGER.handlers):
        return
    handler = _Stderr()
    handler.setFormatter(logging.Formatter("%(message)s"))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False  # the root logger's handlers (pytest's, a caller's) would print each line twice


# Installed at import: every entry point (the CLI, `python -m release.gsm8k`, the tests that call a
# function directly) says the same things at the default level; `configure` only moves the level.
_install()


def configure(verbosity: int) -> None:
    """The level of the whole run: QUIET (-q), DEFAULT, or VERBOSE (-v; more -v change nothing more)."""
    LOGGER.setLevel(_LEVELS[max(QUIET, min(VERBOSE, verbosity))])


def quiet() -> bool:
    """Whether `-q` was given: progress bars, which do not go through the logger, are left out too."""
    return not LOGGER.isEnabledFor(logging.INFO)


def out(text: str = "", end: str = "\n") -> None:
    """A command's result, on stdout, at every level."""
    sys.stdout.write(text + end)
    sys.stdout.flush()


def debug(message: str) -> None:
    LOGGER.debug(message)


def note(message: str) -> None:
    LOGGER.info(message)


def warn(message: str) -> None:
    LOGGER.warning(message)


def error(message: str) -> None:
    LOGGER.error(message)
