"""`python -m release` and the installed `vllm-fused-moe-release` (pyproject.toml [project.scripts])."""

import sys
from pathlib import Path

from release.cli import PROG
from release.cli import main as cli_main


def main() -> int:
    # --help and the examples name the program as it was started.
    started = Path(sys.argv[0]).name
    return cli_main(sys.argv[1:], prog=PROG if started == "__main__.py" else started)


if __name__ == "__main__":
    sys.exit(main())
