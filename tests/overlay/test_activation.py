"""Activation in real processes: fresh venvs, real vLLM wheels and our wheel from our index.

Each venv gets the release wheel of vLLM X (`--no-deps`, linked from uv's cache) and `vllm-fused-moe`
through `pip install --index-url file://INDEX/simple`; torch and vLLM's other import-time dependencies
come from the test environment (tests/helpers/freshvenv.py says how and why). The probes run
concurrently, each a real interpreter that imports vLLM and starts workers the way vLLM does.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from helpers import tag_facts
from helpers.freshvenv import create, site_packages
from release.core.layout import Layout
from release.core.versions import version_of_tag

PROBE = Path(__file__).with_name("probe.py")
CLASSES = ("FlashInferNVLinkTwoSidedPrepareAndFinalize", "FlashInferNVLinkOneSidedPrepareAndFinalize")
HEAD = tag_facts.head()
OTHER = version_of_tag(tag_facts.other_than_head())  # a real release the overlay was not built for
ACTIVATED = f"vllm-fused-moe {HEAD.version}+fm"

pytestmark = pytest.mark.slow


def _run(python: Path, args: list[str], mode: str | None) -> tuple[dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_FUSED_MOE", "PYTHONPATH", "VLLM_PLUGINS")}
    if mode:
        env["VLLM_FUSED_MOE"] = mode
    proc = subprocess.run(
        [str(python), *args], capture_output=True, text=True, env=env, timeout=400, cwd=python.parent.parent
    )
    output = proc.stdout + proc.stderr
    # The probe prints its JSON on its last line, after vLLM's log lines; `info --json` prints only JSON.
    if proc.stdout.startswith("{"):
        return json.loads(proc.stdout), output
    last = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return (json.loads(last[-1]) if last else {"rc": proc.returncode}), output


@pytest.fixture(scope="module")
def runs(
    index: Path, vllm_wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[dict[str, Any], str]]:
    root = tmp_path_factory.mktemp("venvs")
    with ThreadPoolExecutor(2) as pool:
        pinned = pool.submit(create, root / "vllm-pinned", index, ["vllm-fused-moe"], vllm_wheels[HEAD.version])
        other = pool.submit(create, root / "vllm-other", index, ["vllm-fused-moe"], vllm_wheels[OTHER])
        pinned_python, other_python = pinned.result(), other.result()
    jobs = {
        "on": (pinned_python, [str(PROBE), "spawn", "fork"], None),
        # An operator's word for off (tests/overlay/test_modes.py: every such word is `off` to the .pth
        # line and the hook). test_kill_switch.py leans on this run for where off ends in vLLM's import: it
        # shows, in a bare interpreter per damaged install, that off takes this path whatever is broken.
        "off": (pinned_python, [str(PROBE)], "disabled"),
        "other": (other_python, [str(PROBE)], None),
        "strict": (other_python, [str(PROBE)], "strict"),
        "info": (pinned_python, ["-m", "vllm_fused_moe", "--json"], None),
        "info-other": (other_python, ["-m", "vllm_fused_moe", "--json"], None),
    }
    with ThreadPoolExecutor(3) as pool:
        futures = {name: pool.submit(_run, *job) for name, job in jobs.items()}
        results = {name: future.result() for name, future in futures.items()}
    results["sites"] = ({"pinned": str(site_packages(pinned_python)), "other": str(site_packages(other_python))}, "")
    return results


def _assert_from(state: dict[str, Any], directory: str, reduced: bool) -> None:
    assert "error" not in state, state
    for name in CLASSES:
        assert state[name]["file"].startswith(directory + "/"), state[name]
        assert state[name]["module"].startswith("vllm.model_executor.layers.fused_moe.prepare_finalize.")
        assert state[name]["output_is_reduced"] is reduced


def test_vllm_resolves_our_classes_in_the_process_and_in_spawned_and_forked_workers(
    runs: dict[str, tuple[dict[str, Any], str]],
) -> None:
    report, output = runs["on"]
    ours = runs["sites"][0]["pinned"] + "/vllm_fused_moe/prepare_finalize"
    for where in ("main", "spawn", "fork"):
        _assert_from(report[where], ours, reduced=True)
    assert report["spawn"]["start_method"] == "spawn" and report["spawn"]["pid"] != report["main"]["pid"]
    # The hook was in place before vLLM was imported, and no vLLM plugin loading was involved.
    assert report["main"]["vllm_imported_before"] is False and report["main"]["hook_installed"] is True
    assert report["spawn"]["hook_installed"] is True and report["spawn"]["plugins_loaded"] is False
    # One INFO line per interpreter: the main process and the spawned one; a fork inherits the decision.
    activated = [line for line in output.splitlines() if ACTIVATED in line and "activated" in line]
    assert len(activated) == 2 and all(line.startswith("INFO") for line in activated), output[-3000:]


def test_an_operators_word_for_off_leaves_upstream_in_place(runs: dict[str, tuple[dict[str, Any], str]]) -> None:
    report, output = runs["off"]
    _assert_from(report["main"], runs["sites"][0]["pinned"] + "/vllm/model_executor", reduced=False)
    assert "disabled by VLLM_FUSED_MOE=off" in output and "activated" not in output


def test_another_vllm_version_does_not_activate_and_says_why(runs: dict[str, tuple[dict[str, Any], str]]) -> None:
    report, output = runs["other"]
    assert report["main"]["vllm_version"] == OTHER
    _assert_from(report["main"], runs["sites"][0]["other"] + "/vllm/model_executor", reduced=False)
    assert f"built for vLLM {HEAD.tag}, but vLLM {OTHER} is installed; not activating" in output


def test_strict_makes_a_mismatch_an_error(runs: dict[str, tuple[dict[str, Any], str]]) -> None:
    report, _output = runs["strict"]
    assert report["error"].startswith("OverlayMismatchError")
    assert f"vLLM {OTHER} is installed" in report["error"]


def test_info_names_the_tag_the_patches_and_their_origins(
    runs: dict[str, tuple[dict[str, Any], str]], layout: Layout
) -> None:
    from release.model.series import Series

    info, _ = runs["info"]
    assert info["vllm_tag"] == HEAD.tag and info["would_activate"] is True
    assert [p["name"] for p in info["patches"]] == Series.load(layout.series).names
    assert all(p["trailers"].get("Origin") for p in info["patches"])
    other, _ = runs["info-other"]
    assert other["would_activate"] is False and f"{OTHER} is installed" in other["why_not"]
