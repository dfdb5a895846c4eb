"""The lm-eval command line and its results file; the pip command lines of the serving envs."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import tag_facts
from release.core.errors import DataNotFoundError, LmEvalError
from release.gsm8k.lm_eval_runner import build_lm_eval_argv, parse_results
from release.gsm8k.venvs import InstallPlan, install_commands, parse_probe_output, write_pinned_requirements

HEAD = tag_facts.head()


def test_lm_eval_argv_is_the_upstream_reports_command(tmp_path: Path) -> None:
    argv = build_lm_eval_argv(
        ["lm_eval"], base_url="http://127.0.0.1:8000/", model="M", concurrency=32, output_dir=tmp_path, limit=50
    )
    assert argv[:3] == ["lm_eval", "--model", "local-completions"]
    model_args = dict(item.split("=", 1) for item in argv[argv.index("--model_args") + 1].split(","))
    assert model_args == {
        "model": "M",
        "base_url": "http://127.0.0.1:8000/v1/completions",
        "max_length": "8192",
        "tokenized_requests": "False",
        "tokenizer_backend": "None",
        "num_concurrent": "32",
    }
    assert argv[argv.index("--tasks") + 1] == "gsm8k" and argv[argv.index("--num_fewshot") + 1] == "5"
    assert argv[argv.index("--limit") + 1] == "50"
    assert "--limit" not in build_lm_eval_argv(["lm_eval"], base_url="u", model="M", concurrency=1, output_dir=tmp_path)


def write_results(directory: Path, name: str, strict: float, mtime: int) -> None:
    # The shape lm-eval 0.4.x writes with --output_path (results.<task>["metric,filter"]).
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(json.dumps({
        "results": {"gsm8k": {
            "alias": "gsm8k",
            "exact_match,strict-match": strict, "exact_match_stderr,strict-match": 0.0075,
            "exact_match,flexible-extract": 0.93, "exact_match_stderr,flexible-extract": "N/A",
        }},
        "n-samples": {"gsm8k": {"original": 1319, "effective": 1319}},
    }))  # fmt: skip
    os.utime(path, (mtime, mtime))


def test_parse_results_takes_the_newest_file(tmp_path: Path) -> None:
    write_results(tmp_path / "M__model", "results_2026-01-01T00-00-00.json", 0.5, 1_000)
    write_results(tmp_path / "M__model", "results_2026-01-02T00-00-00.json", 0.92, 2_000)
    parsed = parse_results(tmp_path)
    assert parsed["strict-match"].value == pytest.approx(0.92)
    assert parsed["strict-match"].stderr == pytest.approx(0.0075)
    assert parsed["flexible-extract"].stderr is None  # lm-eval writes "N/A" where it has none
    assert parsed["strict-match"].n == 1319


def test_parse_results_without_a_file_is_an_lm_eval_error(tmp_path: Path) -> None:
    with pytest.raises(LmEvalError):
        parse_results(tmp_path)


def test_fixed_install_takes_our_wheel_from_our_project_page_alone_pinned_by_sha256(tmp_path: Path) -> None:
    index = tmp_path / "index"
    plan = InstallPlan(venv=tmp_path / "v", with_patches=True, index_dir=index)
    first, second = install_commands(plan)
    # vLLM defaults to the release vendor/ was built from.
    assert first[-1] == f"vllm=={HEAD.version}" and "--index-url" not in first
    assert first[0] == str(tmp_path / "v" / "bin" / "python")
    # As docs/overlay.md's user install: no index at all (a pip configuration's extra-index-url
    # would add impostors to any index named here), our page as find-links, our wheel by its hash.
    assert second[second.index("--find-links") + 1] == (index / "simple" / "vllm-fused-moe").resolve().as_uri() + "/"
    assert "--no-index" in second and "--index-url" not in second and "--extra-index-url" not in second
    assert second[-2:] == ["-r", str(index.resolve() / "requirements" / f"vllm-{HEAD.version}.txt")]


def test_a_named_wheel_version_is_pinned_by_the_sha256_of_its_bytes(tmp_path: Path) -> None:
    index = tmp_path / "index"
    page = index / "simple" / "vllm-fused-moe"
    page.mkdir(parents=True)
    overlay = f"{HEAD.version}+fm.2"
    wheel = page / f"vllm_fused_moe-{overlay}-py3-none-any.whl"
    wheel.write_bytes(b"our wheel")
    plan = InstallPlan(venv=tmp_path / "work" / "v", with_patches=True, index_dir=index, overlay_version=overlay)
    write_pinned_requirements(plan)
    _, second = install_commands(plan)
    pinned = Path(second[-1]).read_text()
    assert pinned == f"vllm-fused-moe=={overlay} \\\n    --hash=sha256:{hashlib.sha256(b'our wheel').hexdigest()}\n"
    with pytest.raises(DataNotFoundError, match=r"holds no vllm-fused-moe .*\+fm\.3"):
        write_pinned_requirements(replace(plan, overlay_version=f"{HEAD.version}+fm.3"))


def test_upstream_install_is_vllm_alone(tmp_path: Path) -> None:
    plan = InstallPlan(
        venv=tmp_path / "v", with_patches=False, vllm_index_args=("--index-url", "https://mirror/simple")
    )
    (only,) = install_commands(plan)
    assert only[-3:] == ["--index-url", "https://mirror/simple", f"vllm=={HEAD.version}"]
    assert not any("fused-moe" in part for part in only)


def test_fixed_install_without_index_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError):
        install_commands(InstallPlan(venv=tmp_path / "v", with_patches=True))


def test_probe_output_is_found_among_log_lines() -> None:
    stdout = 'INFO noise\nGSM8K-PROBE {"versions": {"vllm": "1.2.3"}, "output_is_reduced": {}}\n'
    assert parse_probe_output(stdout)["versions"] == {"vllm": "1.2.3"}
