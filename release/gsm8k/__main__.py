"""Standalone entry: `python -m release.gsm8k --help` (the same as `python -m release gsm8k`)."""

from __future__ import annotations

import argparse
import sys

from release.core.errors import ReleaseError
from release.core.layout import Layout
from release.gsm8k import cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m release.gsm8k")
    cli.configure(parser)
    args = parser.parse_args(argv)
    try:
        return cli.run(args, Layout.default())
    except ReleaseError as err:
        print(f"error: {err}", file=sys.stderr)
        if err.hint:
            print(f"hint: {err.hint}", file=sys.stderr)
        return err.exit_code


if __name__ == "__main__":
    sys.exit(main())
