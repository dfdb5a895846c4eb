"""The rebase report, written for a person (Markdown) and a machine (JSON), rendered in this process.

Reports of real rebases, read back from disk: tests/cli/test_conflict_path.py, tests/e2e/test_rebase.py.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from release.model.outcome import Conflict, PatchOutcome, PatchStatus
from release.rebase.report import RebaseReport, upstream_changes

WORK = ".work/rebase-v0.20.99"


def report(**changes: object) -> RebaseReport:
    fields: dict[str, object] = {
        "old_tag": "v0.20.98",
        "new_tag": "v0.20.99",
        "source": "dir:/src",
        "wheel": "",
        "wheel_sha256": "",
        "commit": "",
        "flashinfer_old": "flashinfer-python==0.6.6",
        "flashinfer_new": "flashinfer-python==0.6.8.post1",
        "flashinfer_verified": "0.6.6, 0.6.8.post1",
        "dry_run": False,
        "result": "conflict",
        "patches": [
            PatchOutcome("0001-a.patch", "a: fix", PatchStatus.APPLIES, "as it is", refreshed=True),
            PatchOutcome(
                "0002-b.patch",
                "b: ours",
                PatchStatus.CONFLICT,
                "3-way failed",
                conflicts=[Conflict("x/mori.py", ["@@ -1,3 +1,3 @@"], "import torch  # upstream\n", "+ours\n")],
            ),
            PatchOutcome("0003-c.patch", "c: later", PatchStatus.NOT_REACHED),
        ],
        "upstream_changes": upstream_changes({"mori.py": b"a\nb\n"}, {"mori.py": b"a\nc\nd\n", "new.py": b"x\n"}),
        "work_dir": WORK,
        "continue_command": f"python -m release rebase --continue {WORK}",
        "abort_command": f"python -m release rebase --abort {WORK}",
    }
    fields.update(changes)
    return RebaseReport(**fields)  # type: ignore[arg-type]


def test_a_conflict_report_says_what_stopped_and_how_to_finish() -> None:
    text = report().to_markdown()
    assert text.startswith("# Rebase onto vLLM v0.20.99: conflict\n")
    assert "| `0002-b.patch` | **conflict** | 3-way failed | no |" in text
    assert "| `0001-a.patch` | **applies** | as it is | yes |" in text
    assert "### Conflict in `0002-b.patch`: `x/mori.py`" in text and "`@@ -1,3 +1,3 @@`" in text
    assert "```python\nimport torch  # upstream\n```" in text
    assert f"- continue: `python -m release rebase --continue {WORK}`" in text
    assert f"- or abort: `python -m release rebase --abort {WORK}`" in text
    assert "outside the verified range" not in text  # vLLM's pin is one of the verified versions


def test_a_flashinfer_pin_outside_the_verified_versions_is_called_out() -> None:
    for pin in ("flashinfer-python==0.7.3", "flashinfer-python>=0.6.6", ""):
        assert "**outside the verified range" in report(flashinfer_new=pin).to_markdown(), pin


def test_a_finished_report_has_no_way_to_finish_and_says_a_dry_run() -> None:
    text = report(result="done", work_dir="", dry_run=True, upstream_changes=[]).to_markdown()
    assert text.startswith("# Rebase onto vLLM v0.20.99: done (dry run, nothing written)\n")
    assert "## To finish" not in text
    assert text.endswith("## Upstream changes in the subtree since v0.20.98\n\nnone\n")


def test_upstream_changes_count_lines_per_file() -> None:
    changes = upstream_changes(
        {"same.py": b"a\n", "edited.py": b"a\nb\n", "gone.py": b"x\ny\n"},
        {"same.py": b"a\n", "edited.py": b"a\nc\nd\n", "new.py": b"z\n"},
    )
    assert [(c.file, c.change, c.added_lines, c.removed_lines) for c in changes] == [
        ("edited.py", "modified", 2, 1),
        ("gone.py", "removed", 0, 2),
        ("new.py", "added", 1, 0),
    ]


def test_the_json_holds_every_field_and_both_files_are_written(tmp_path: Path) -> None:
    made = report()
    assert json.loads(made.to_json()) == json.loads(json.dumps(asdict(made)))
    md, js = made.write(tmp_path / "reports")
    assert md.read_text() == made.to_markdown() and json.loads(js.read_text())["work_dir"] == WORK
