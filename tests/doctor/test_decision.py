"""The doctor's decisions, in process.

- The hook's decision through `_activate.activation()`; `decide()` acts on it. For every mode, vLLM
  version and FlashInfer version, the pure function and the hook agree: the hook activates exactly
  when `activation()` says so, raises (strict) exactly when it says no, and logs its reason.
- The verdict on a `vllm serve` command line and its environment, for every affected release of the
  scan data, decided as that release does from its line's data (`lines.<line>.builds` and `serve`):
  a backend the release does not have is refused (exit 2), the class named is the line's, the
  DP-chunked path follows VLLM_ENABLE_MOE_DP_CHUNK where the release reads it, VLLM_ALL2ALL_BACKEND
  counts as the release reads it, tensor parallel 1 never reduces twice, and a fix is printed only
  where there is something to fix. No release is named here: each comes from the data.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from helpers import REPO
from helpers.build_facts import INFO
from helpers.doctor import doctor_module, judge, overlay, scan_data
from helpers.hook_log import Said, hook_sees, own_logger
from vllm_fused_moe import MODE_ENV, _activate, _finder
from vllm_fused_moe.__main__ import what_to_do


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> Iterator[Said]:
    yield from own_logger(monkeypatch, "test-decision")


@pytest.mark.parametrize("mode", ["", "on", "off", "strict", "0", "bogus"])
@pytest.mark.parametrize("vllm", ["0.20.0", "0.20.0+cu129", "0.21.0"])
@pytest.mark.parametrize("flashinfer", [None, "0.6.8.post1", "0.7.3"])
def test_activation_is_what_decide_does(
    mode: str, vllm: str, flashinfer: str | None, monkeypatch: pytest.MonkeyPatch, said: Said
) -> None:
    hook_sees(monkeypatch, vllm, flashinfer)
    monkeypatch.setenv(MODE_ENV, mode)
    active, reason = _activate.activation(INFO, _finder.mode(), vllm, flashinfer)
    if not active and _finder.mode() == "strict":
        with pytest.raises(_activate.OverlayMismatchError, match="strict") as raised:
            _activate.decide()
        text = str(raised.value)
    else:
        assert _activate.decide() is active
        text = "\n".join(said.lines)
    if reason:
        assert reason in text
    assert (reason is None) is (active and flashinfer != "0.7.3")
    assert active is (
        mode not in ("off", "0") and vllm != "0.21.0" and not (mode == "strict" and flashinfer == "0.7.3")
    )


# ------------------------------------------------------------------------- `vllm serve` per release

doctor = doctor_module()
DATA = scan_data()
SCAN = doctor.ScanData.from_json(DATA)
AFFECTED = [v for v, e in DATA["releases"].items() if e["status"] == "affected"]
MISSPELT = "flashinfer_nvlink_three_sided"
# Every --all2all-backend value some affected release accepts (the data's union), and one none has.
EVERY_BACKEND = sorted(
    {b for info in DATA["lines"].values() for r in info.get("serve") or [] for b in r["all2all_backends"]} | {MISSPELT}
)


def serve_facts(version: str) -> Any:
    found = doctor.serve_facts(SCAN, DATA["releases"][version]["line"], version)
    assert found is not None and found.range is not None, f"no serve facts for vLLM {version}"
    return found


def facts(version: str) -> dict[str, Any]:
    """serve_facts() as JSON, to read."""
    said: dict[str, Any] = doctor.records.to_json(serve_facts(version))
    return said


def decide(version: str, argv: str, env: dict[str, str] | None = None, **installed: Any) -> dict[str, Any]:
    """The whole verdict for `vllm serve ARGV` on vLLM `version`, with our overlay as `overlay` says
    (default: not installed), as report() concludes it from the facts."""
    serve = doctor.serve_layout(["vllm", "serve", "m", *argv.split()], env or {}, serve_facts(version))
    return judge(doctor, version, doctor.release_facts(SCAN, None, version), overlay(doctor, **installed), serve)


def one_of(version: str, key: str) -> list[str]:
    return list(facts(version)["range"][key])


@pytest.mark.parametrize("version", AFFECTED)
def test_a_backend_the_release_does_not_have_is_refused_with_exit_2(version: str) -> None:
    choices = one_of(version, "all2all_backends")
    for backend in EVERY_BACKEND:
        report = decide(version, f"-tp 2 -dp 2 -ep --all2all-backend {backend}")
        if backend in choices:
            assert report["verdict"] != "refused", report["summary"]
            continue
        assert report["verdict"] == "refused" and report["exit_code"] == 2, (backend, report["summary"])
        assert report["summary"] == (
            f"vLLM {version} would refuse this command line: --all2all-backend {backend} is not one of "
            + ", ".join(choices)
        )
        assert (
            report["fix"]["argv"] is None
            and report["fix"]["why"] == f"give vLLM {version} one of: {', '.join(choices)}"
        )
    assert MISSPELT not in choices


@pytest.mark.parametrize("version", AFFECTED)
def test_the_command_line_names_the_class_of_the_installed_releases_line(version: str) -> None:
    found = facts(version)
    line = DATA["lines"][found["line"]]
    for backend, cls in found["builds"].items():
        assert cls in line["live"]["classes"]
        report = decide(version, f"-tp 2 -dp 2 -ep --all2all-backend {backend}", {"VLLM_ENABLE_MOE_DP_CHUNK": "0"})
        assert report["serve"]["uses_affected_class"] == cls and cls in report["serve"]["why"]
        assert report["verdict"] == "affected" and report["serve"]["reduce_runs"] is True
    # No other class: the head's names appear only where the line builds them.
    for cls in set(doctor.CLASSES) - set(found["builds"].values()):
        for backend in found["builds"]:
            assert cls not in decide(version, f"-tp 2 -dp 2 -ep --all2all-backend {backend}")["serve"]["why"]


@pytest.mark.parametrize("version", AFFECTED)
def test_the_dp_chunked_path_follows_the_environment_as_the_release_reads_it(version: str) -> None:
    span = facts(version)["range"]
    switch = span["dp_chunk_env"]
    for backend in facts(version)["builds"]:
        argv = f"-tp 2 -dp 2 -ep --all2all-backend {backend}"
        default = decide(version, argv)
        if backend not in span["dp_chunked"]:
            assert default["serve"]["dp_chunked"] is False
            continue
        assert default["serve"]["dp_chunked"] is True and "DP-chunked path" in default["serve"]["why"]
        # The layer's reduce is skipped there, not the models' own: still affected, and it says why.
        assert default["verdict"] == "affected" and "all-reduces its MoE output itself" in default["serve"]["why"]
        if switch is None:  # no switch on this release: the variable changes nothing
            ignored = decide(version, argv, {"VLLM_ENABLE_MOE_DP_CHUNK": "0"})
            assert ignored["serve"]["dp_chunked"] is True
            assert any("VLLM_ENABLE_MOE_DP_CHUNK is not read" in n for n in ignored["serve"]["notes"])
            continue
        off = decide(version, argv, {switch: "0"})
        assert off["serve"]["dp_chunked"] is False and off["verdict"] == "affected"
        assert off["serve"]["environment"] == {switch: {"value": "0", "from": "environment"}}
        assert decide(version, argv, {switch: "1"})["serve"]["dp_chunked"] is True
        broken = decide(version, argv, {switch: "yes"})
        assert broken["verdict"] == "refused" and broken["exit_code"] == 2
        assert f"{switch}='yes' is not an integer" in broken["summary"]
    if not span["dp_chunked"]:
        report = decide(version, "-tp 2 -dp 2 -ep --all2all-backend " + next(iter(facts(version)["builds"])),
                        {"VLLM_ENABLE_MOE_DP_CHUNK": "0"})  # fmt: skip
        assert report["serve"]["dp_chunked"] is False and report["verdict"] == "affected"


@pytest.mark.parametrize("version", AFFECTED)
def test_the_backend_variable_counts_as_the_release_reads_it(version: str) -> None:
    span = facts(version)["range"]
    backend = next(iter(facts(version)["builds"]))
    other = next(b for b in span["all2all_backends"] if b not in facts(version)["builds"])
    env = {"VLLM_ALL2ALL_BACKEND": backend}
    without_flag = decide(version, "-tp 2 -dp 2 -ep", env)["serve"]
    with_flag = decide(version, f"-tp 2 -dp 2 -ep --all2all-backend {other}", env)["serve"]
    mode = span["backend_env"]
    assert without_flag["backend_from"] == ("vLLM's default" if mode == "ignored" else "VLLM_ALL2ALL_BACKEND")
    assert with_flag["backend_from"] == ("VLLM_ALL2ALL_BACKEND" if mode == "overrides" else "--all2all-backend")
    assert with_flag["all2all_backend"] == (backend if mode == "overrides" else other)
    if mode == "ignored":
        assert any(f"vLLM {version} does not read it" in n for n in without_flag["notes"])
    else:
        bad = decide(version, "-tp 2 -dp 2 -ep", {"VLLM_ALL2ALL_BACKEND": MISSPELT})
        assert bad["verdict"] == "refused"
        assert f"would refuse this environment: VLLM_ALL2ALL_BACKEND={MISSPELT} is not one of" in bad["summary"]


@pytest.mark.parametrize("version", AFFECTED)
def test_tensor_parallel_1_never_reduces_twice_and_not_used_prints_no_fix(version: str) -> None:
    backend = next(iter(facts(version)["builds"]))
    for argv in (f"-dp 4 -ep --all2all-backend {backend}", f"-tp 2 --all2all-backend {backend}", "-tp 2 -dp 2 -ep"):
        report = decide(version, argv)
        assert report["verdict"] == "not-used" and report["exit_code"] == 0, report["summary"]
        assert report["fix"] is None
        # Not even with our overlay installed and switched off: nothing to fix for this command line.
        off = decide(version, argv, installed=True, for_this_vllm=True, mode="off", activates=False, reason="off")
        assert off["verdict"] == "not-used" and off["fix"] is None
    # decide() names the index by its simple/ page: the requirements file lies beside it
    assert decide(version, f"-tp 2 -dp 4 -ep --all2all-backend {backend}")["fix"]["argv"][-1] == (
        f"https://index.example/requirements/vllm-{version}.txt"
    )


@pytest.mark.parametrize(("word", "why", "hook_active"), [("disabled", "off", False), ("never", "off", False),
                                                         ("on", "ModuleNotFoundError: gone", None)])  # fmt: skip
def test_live_reads_off_as_the_pth_read_it(
    word: str, why: str, hook_active: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--live's `hook_active` with the .pth's stand-in in place: off for any word for off (the stand-in
    read the switch with the hook's words), no hook when it stands in for a broken one."""
    import _vllm_fused_moe_pth

    monkeypatch.setenv(MODE_ENV, word)
    monkeypatch.setattr(sys, "meta_path", [_vllm_fused_moe_pth.OverlayStandIn(why, strict=False), *sys.meta_path])
    live = doctor.live_classes(None, module_name="json", names=())
    assert live.error is None and live.hook_active is hook_active


# ----------------------------------------------------------------------------- the install it prints

DOC_URL, DOC_VLLM = "https://fused-moe.example.com", "0.20.0"  # docs/overlay.md's example index and vLLM


def documented_install(url: str, vllm: str) -> tuple[str, str]:
    """docs/overlay.md "Install", pip: the install line and the check line, for index `url` and vLLM `vllm`
    (the block tests/overlay/test_user_install.py runs as written)."""
    text = (REPO / "docs" / "overlay.md").read_text(encoding="utf-8")
    block = re.search(r"^<!-- user-install: pip -->\n```\w*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert block, "docs/overlay.md lost its pip user-install block"
    install, check = [line for line in block.group(1).splitlines() if line.strip()][1:3]
    assert check == "python -m pip check", check
    return install.replace(DOC_URL, url).replace(f"vllm-{DOC_VLLM}.txt", f"vllm-{vllm}.txt"), check


@pytest.mark.parametrize("given", ["", "/", "/simple", "/simple/"])
def test_the_fix_of_an_affected_train_release_is_the_documented_install_then_pip_check(given: str) -> None:
    """--index-url names the index publish wrote (its simple/ page means the same index: both spellings are in use)."""
    version = next(v for v in AFFECTED if DATA["releases"][v]["in_train"])
    release = doctor.release_facts(SCAN, None, version)
    fix = judge(doctor, version, release, index_url=f"{DOC_URL}{given}", python="python")["fix"]
    install, check = documented_install(DOC_URL, version)
    assert fix["command"] == f"{install} && {check}"
    assert (fix["argv"], fix["check"]) == (shlex.split(install), shlex.split(check))


def test_info_on_another_vllm_names_the_documented_install_of_that_release() -> None:
    said = what_to_do(INFO, "0.34.0", "built for vLLM v0.20.0, but vLLM 0.34.0 is installed", "on")
    install, check = documented_install("URL", "0.34.0")
    assert said is not None and f"{install} && {check}" in said
    assert "requirements/vllm-0.34.0.txt" in said and "No overlay for your vLLM" in said


def test_without_a_known_index_no_command_is_printed_that_would_fail_as_printed() -> None:
    """Issue 38, 2: `<INDEX_URL>` in an argv is a command that fails as printed ("Could not open
    requirements file"). Without --index-url or VLLM_FUSED_MOE_INDEX_URL the fix says how to get it."""
    version = next(v for v in AFFECTED if DATA["releases"][v]["in_train"])
    release = doctor.release_facts(SCAN, None, version)
    fix = judge(doctor, version, release, index_url=None, python="python")["fix"]
    assert fix["command"] is None and fix["argv"] is None, fix
    assert "--index-url URL" in fix["why"] and doctor.INDEX_ENV in fix["why"] and "<INDEX_URL>" not in fix["why"]
