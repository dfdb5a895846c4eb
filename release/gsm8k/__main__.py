"""Standalone entry: `python -m release.gsm8k --help` is `python -m release gsm8k --help`.

The same parser, error handling and exit codes as the main CLI (release/cli.py), not a copy.
"""

from __future__ import annotations

import sys

from release.cli import main as release_main


def main(argv: list[str] | None = None) -> int:
    return release_main(["gsm8k", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
