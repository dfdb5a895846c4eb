"""Wall time of the patch editing loop: `pq import`, `pq export`, and adding two downstream patches to every tag.

Not a test: every figure is a real process (`python -m release`, or the maintainer's `git`) on a
throw-away copy of this checkout, median of --runs fresh copies, with the release wheels already
cached (a first `train check` warms the cache and the page cache). The flow is the commands of
docs/patch-queue.md, "Add a patch", as written, for three patches, two on one file: import, then
twice `pq new`, the edit (a check of the EP size in the one-sided finalize, the file 0001 changes,
so it is stacked on 0001; then a shape check in the two-sided finalize; both made by this script)
and `git commit -t` (the template answered by a scripted GIT_EDITOR); export, `pq carry --all`
(each older release line's variants, where they apply on every tag of the line, and the head
line's series on its every tag), `pq skip` of each line the carry report names, check,
`train add --all`, `train check`.

    python benchmarks/pq.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TWO_SIDED = ".work/pq/vllm/model_executor/layers/fused_moe/prepare_finalize/flashinfer_nvlink_two_sided.py"
ONE_SIDED = ".work/pq/vllm/model_executor/layers/fused_moe/prepare_finalize/flashinfer_nvlink_one_sided.py"
EP_SIZE = "        ep_size = self.all2all_manager.world_size\n"
EP_SIZE_CHECK = '        assert ep_size > 0, "finalize: no EP ranks"\n'
SHAPE_CHECK = '        assert output.dim() == 2, f"finalize: output is {tuple(output.shape)}, not (tokens, hidden)"\n'
# The maintainer's answers to the template, typed by GIT_EDITOR.
FILL = """import re, sys
path = sys.argv[1]
out = []
text = open(path, encoding="utf-8").read()
for line in text.splitlines():
    if line.startswith("Bug:"):
        continue
    if re.fullmatch(r"<[^>]*>", line):
        line = "fused_moe: a check in the finalize, " + re.search(r"^Patch-Name: (\\S+)$", text, re.M).group(1)
    out.append(re.sub(r"^([A-Za-z][A-Za-z -]*): <.*>$", lambda m: m.group(1) + ": benchmark answer", line))
open(path, "w", encoding="utf-8").write("\\n".join(out) + "\\n")
"""
STEPS = [
    ("import", ["python", "-m", "release", "pq", "import"]),
    ("export, unchanged", ["python", "-m", "release", "pq", "export"]),
    ("export --check", ["python", "-m", "release", "pq", "export", "--check"]),
    ("new (stacked on 0001's file)", ["python", "-m", "release", "pq", "new", "ep-size-check"]),
    ("edit", ["$EDITOR", ONE_SIDED]),
    ("git commit -t", ["git", "-C", ".work/pq", "commit", "-q", "-a", "-t", ".git/pq-template"]),
    ("new (another file)", ["python", "-m", "release", "pq", "new", "shape-check"]),
    ("edit ", ["$EDITOR", TWO_SIDED]),
    ("git commit -t ", ["git", "-C", ".work/pq", "commit", "-q", "-a", "-t", ".git/pq-template"]),
    ("export, two new patches", ["python", "-m", "release", "pq", "export"]),
    ("carry --all", ["python", "-m", "release", "pq", "carry", "--all"]),
    ("skip (each line carry names)", ["$SKIP"]),
    ("check", ["python", "-m", "release", "check"]),
    ("train add --all", ["python", "-m", "release", "train", "add", "--all"]),
    ("train check", ["python", "-m", "release", "train", "check"]),
]
# The maintainer's commands of the flow ("Add a patch"): everything but the two measurements of an unchanged queue.
FLOW = [name for name, _ in STEPS if name not in ("export, unchanged", "export --check")]


def edit(path: Path) -> None:
    if path.name.endswith("one_sided.py"):
        path.write_text(path.read_text().replace(EP_SIZE, EP_SIZE + EP_SIZE_CHECK, 1))
        return
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("    def finalize("))
    body = next(i for i in range(at, len(lines)) if re.match(r"^\s*\) -> None:\s*$", lines[i])) + 1
    path.write_text("".join([*lines[:body], SHAPE_CHECK, *lines[body:]]))


def run(root: Path, argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    if argv[0] == "$EDITOR":
        edit(root / argv[1])
        return time.perf_counter() - start
    if argv[0] == "$SKIP":
        report = json.loads((root / "reports" / "pq-carry" / "carry-report.json").read_text())
        for patch, lines in report["silent"].items():
            for line in lines:
                why = "the line has no counterpart of the class it changes (benchmark)"
                run(root, ["python", "-m", "release", "pq", "skip", patch, "--line", line, "--reason", why], env)
        return time.perf_counter() - start
    if argv[:3] == ["python", "-m", "release"]:
        command, cwd = [sys.executable, "-m", "release", "--root", str(root), *argv[3:]], REPO
    else:
        command, cwd = argv, root
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr[-1500:]}")
    return seconds


def one_run(tmp: Path, index: int, env: dict[str, str]) -> dict[str, float]:
    root = tmp / f"project-{index}"
    for name in ("vendor", "patches"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return {name: run(root, argv, env) for name, argv in STEPS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pq-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "fill.py").write_text(FILL)
        (tmp / "gitconfig").write_text("")
        env = {
            **os.environ,  # HOME too: the release wheels are read from the user's cache (~/.cache/vllm-fused-moe)
            "GIT_CONFIG_GLOBAL": str(tmp / "gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "A Maintainer",
            "GIT_AUTHOR_EMAIL": "maintainer@example.com",
            "GIT_COMMITTER_NAME": "A Maintainer",
            "GIT_COMMITTER_EMAIL": "maintainer@example.com",
            "GIT_EDITOR": f"{sys.executable} {tmp / 'fill.py'}",
        }
        warm = run(REPO, ["python", "-m", "release", "train", "check"], env)
        print(f"warm-up: `train check` of this checkout {warm:.2f} s (release wheels cached)")
        runs = [one_run(tmp, index, env) for index in range(args.runs)]
    print(f"\n{args.runs} runs, each on a fresh copy of vendor/ and patches/ (s)\n")
    print("| step | command | min | median | max |")
    print("| --- | --- | --- | --- | --- |")
    for name, argv in STEPS:
        values = [r[name] for r in runs]
        shown = " ".join(argv).replace(TWO_SIDED, ".work/pq/.../flashinfer_nvlink_two_sided.py")
        shown = shown.replace(ONE_SIDED, ".work/pq/.../flashinfer_nvlink_one_sided.py").replace("$SKIP", "pq skip ...")
        print(f"| {name} | `{shown}` | {min(values):.2f} | {statistics.median(values):.2f} | {max(values):.2f} |")
    totals = [sum(r[name] for name in FLOW) for r in runs]
    print(
        f'| **add two downstream patches to every tag** | the {len(FLOW)} commands of "Add a patch" | '
        f"{min(totals):.2f} | {statistics.median(totals):.2f} | {max(totals):.2f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
