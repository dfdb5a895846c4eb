"""The backend process of release/overlay/backend.py: many PEP 517 `build_wheel` calls in one interpreter.

Run by path (`python -P backend_worker.py`), never imported: it imports the standard library and the
backend alone. One request a line on stdin, `{"backend": MODULE, "stage": DIR, "out": DIR}`; for each, in
DIR, the backend's `build_wheel(out)` (PEP 517), as pyproject_hooks' in-process hook calls it; one answer a
line on stdout, `{"wheel": NAME}` or `{"error": TRACEBACK}`. What the backend prints goes to stderr, so
stdout carries the answers alone. SOURCE_DATE_EPOCH and PYTHONHASHSEED come from the environment the
parent gives the process, once.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback


def main() -> int:
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the backend's prints (fd 1 and sys.stdout) go to stderr
    sys.stdout = sys.stderr
    for line in sys.stdin:
        try:
            request = json.loads(line)
            os.chdir(request["stage"])
            backend = importlib.import_module(request["backend"])
            answer = {"wheel": backend.build_wheel(request["out"])}
        except Exception:  # every failure is the parent's to report, with the backend's traceback
            answer = {"error": traceback.format_exc()}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
