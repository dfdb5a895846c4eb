"""`python -m release.core.py310 DIR`: every module of DIR compiles under Python 3.10's grammar.

The import hook runs in users' interpreters, and vLLM supports Python 3.10; the tooling itself
needs 3.11. `ast.parse(feature_version=(3, 10))` rejects 3.11+ syntax (`except*`, PEP 646
star-unpacking in subscripts); names added to the standard library later (tomllib) are
checked by test, since a grammar cannot see them.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

# vLLM's own vendored files follow vLLM's rules, not ours.
SKIP = ("prepare_finalize", "upstream")


def check(directory: Path) -> list[str]:
    problems = []
    for path in sorted(directory.rglob("*.py")):
        if any(part in SKIP for part in path.relative_to(directory).parts):
            continue
        try:
            ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 10))
        except SyntaxError as exc:
            problems.append(f"{path}:{exc.lineno}: not Python 3.10 syntax: {exc.msg}")
    return problems


def main(argv: list[str]) -> int:
    problems = [line for arg in argv for line in check(Path(arg))]
    print("\n".join(problems) if problems else f"Python 3.10 grammar: ok ({', '.join(argv)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
