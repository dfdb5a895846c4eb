"""The GitHub workflows: the properties we rely on, read from the YAML in this process.

The real linters (check-jsonschema, zizmor) run as processes in tests/cli/test_workflows.py. Four
properties checked here zizmor's auditor persona also reports (an action not pinned to a commit:
unpinned-uses; a checkout keeping credentials: artipacked; an expression in a run script:
template-injection; no permissions: excessive-permissions; each seen on a one-step workflow,
zizmor 1.32), but zizmor takes an inline `zizmor: ignore[...]` and is a process: this test is
the in-process floor that no ignore lifts, in the edit loop, and the linters' tests stay in cli/.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO, tag_facts

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
SHA_PIN_RE = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def load(path: Path) -> dict[str, Any]:
    yaml = pytest.importorskip("ruamel.yaml", reason="ruamel.yaml comes with check-jsonschema (nox -s test)")
    workflow: dict[str, Any] = yaml.YAML(typ="safe").load(path.read_text())
    return workflow


def steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def test_the_three_workflows_exist() -> None:
    assert {"ci.yml", "nvlink.yml", "watch.yml"} <= {p.name for p in WORKFLOWS}


def test_every_zizmor_ignore_is_explained() -> None:
    for path in WORKFLOWS:
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            if "zizmor: ignore[" in line:
                before = lines[number - 1].strip()
                assert before.startswith("#") and "Explained" in "".join(lines[max(0, number - 4) : number]), (
                    f"{path.name}:{number + 1} ignores a zizmor finding without saying why"
                )


def test_actions_are_pinned_by_commit_and_checkouts_keep_no_credentials() -> None:
    for path in WORKFLOWS:
        workflow = load(path)
        assert "permissions" in workflow, f"{path.name}: no top-level permissions"
        for step in steps(workflow):
            if "uses" in step:
                assert SHA_PIN_RE.match(step["uses"]), f"{path.name}: {step['uses']} is not pinned to a commit"
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step.get("with", {}).get("persist-credentials") is False, path.name
        text = path.read_text()
        for match in re.finditer(r"^\s+run: .*|^\s+run: \|\n(?:\s{8,}.*\n)+", text, re.MULTILINE):
            assert "${{" not in match.group(0), f"{path.name}: an expression inside a run script"


def test_ci_runs_the_readme_test_command_with_the_wheel_cache() -> None:
    ci = load(REPO / ".github" / "workflows" / "ci.yml")
    assert set(ci["on"]) == {"push", "pull_request"}
    assert ci["jobs"]["test"]["runs-on"] == "ubuntu-latest"
    runs = [s.get("run", "") for s in steps(ci)]
    assert ".ci/run" in runs
    # .ci/run is the README's second command, word for word, and nothing else.
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    two = re.search(r"^## Work on the fork\n.*?^```\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
    assert two, "README.md has no code block under '## Work on the fork'"
    rebase, test = two.group(1).strip().splitlines()
    # The README's first command rebases onto the release tests/releases.toml names as `rebase.to`.
    assert rebase.endswith(f"python3 -m nox -s rebase -- {tag_facts.rebase_to()} --from pypi")
    assert test.endswith("python3 -m nox -s lint test")
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [line for line in script if line and not line.startswith(("#", "set ", "cd "))]
    assert commands == [test]
    cache = next(s for s in steps(ci) if s.get("uses", "").startswith("actions/cache@"))
    assert cache["with"]["path"] == "~/.cache/vllm-fused-moe/wheels"


def test_nvlink_runs_kernel_and_gsm8k_compare_for_both_backends_on_nvlink_runners() -> None:
    nvlink = load(REPO / ".github" / "workflows" / "nvlink.yml")
    assert set(nvlink["on"]) == {"workflow_dispatch", "push"} and nvlink["on"]["push"]["tags"]
    for job in nvlink["jobs"].values():
        assert job["runs-on"] == ["self-hosted", "nvlink"]
        uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
        assert uploads and all(s["if"] == "always()" for s in uploads)
    gsm8k = nvlink["jobs"]["gsm8k"]
    assert set(gsm8k["strategy"]["matrix"]["backend"]) == {"flashinfer_nvlink_two_sided", "flashinfer_nvlink_one_sided"}
    scripts = "\n".join(s.get("run", "") for job in nvlink["jobs"].values() for s in job["steps"])
    assert "-s kernel" in scripts and "-s gsm8k --" in scripts and "--compare" in scripts


def test_watch_scans_after_the_newest_train_tag_adds_to_the_train_and_avoids_duplicate_prs() -> None:
    watch = load(REPO / ".github" / "workflows" / "watch.yml")
    assert "schedule" in watch["on"] and watch["permissions"] == {}
    scripts = "\n".join(s.get("run", "") for s in steps(watch))
    # The newest train tag comes from the train itself; the scan starts there.
    assert "nox -s train -- list --json" in scripts and '["releases"][-1]["tag"]' in scripts
    assert 'python -m release scan --from pypi --since "$NEWEST" --json' in scripts
    # `train watch` adds what applies (train add) and reports what is upstream; check proves it.
    assert "nox -s train -- watch reports/scan.json --report reports/train-watch.md" in scripts
    assert "nox -s train -- check" in scripts
    assert 'gh pr list --head "$branch" --state open' in scripts
    assert "gh pr edit" in scripts and "gh pr create" in scripts and '--body-file "$report"' in scripts
    # train.toml and the scan's documents (the JSON beside the doctor that ships it)
    assert "git add -- patches docs release/overlay/runtime/vllm_fused_moe/affected-releases.json" in scripts
    assert all("GH_TOKEN" in s.get("env", {}) for s in steps(watch) if "gh " in s.get("run", ""))
    # vendor/ (the head) is never rebased by the watch: a release with the fix would retire the patch.
    assert "nox -s rebase" not in scripts
