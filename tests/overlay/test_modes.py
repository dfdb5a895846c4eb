"""`VLLM_FUSED_MOE`: an operator's word for off means off, for on means on; anything else warns.

In-process: the hook's parsing (`_finder.mode()`) and its decision (`_activate.decide()`, with the
build facts of helpers/build_facts.py). In real processes: the `.pth` line of the wheel, run by a fresh
interpreter over the wheel's files assembled as the build does (release.overlay.stage.assemble),
and `python -m vllm_fused_moe info`. (A real venv with vLLM and our wheel:
tests/overlay/test_activation.py, `disabled`; tests/overlay/test_kill_switch.py, an unknown word.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import REPO
from helpers.hook_log import Said, hook_sees, own_logger
from release.core.layout import Layout
from release.overlay import project, stage
from release.overlay.target import head_target
from release.queue.snapshot import Checkout
from vllm_fused_moe import _activate, _finder

OFF = ["off", "OFF", " Off ", "0", "false", "False", "no", "n", "disable", "disabled", "DISABLED", "none", "never"]
ON = ["", " ", "on", "ON", "1", "true", "TRUE", "yes", "y", "enable", "enabled"]
UNKNOWN = ["bogus", "stritc", "offf", "2"]


@pytest.mark.parametrize("word", OFF)
def test_every_common_word_for_off_means_off(word: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_finder.MODE_ENV, word)
    assert _finder.mode() == "off"


@pytest.mark.parametrize("word", ON)
def test_every_common_word_for_on_means_on(word: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_finder.MODE_ENV, word)
    assert _finder.mode() == "on"


def test_strict_is_strict_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_finder.MODE_ENV, " Strict ")
    assert _finder.mode() == "strict"


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> Iterator[Said]:
    # A logger of the test's own (helpers/hook_log.py says why), the hook seeing the vLLM its wheel was built for.
    hook_sees(monkeypatch)
    yield from own_logger(monkeypatch, "test-modes")


@pytest.mark.parametrize("word", ["disabled", "None", "never"])
def test_decide_serves_upstream_for_a_word_for_off(word: str, monkeypatch: pytest.MonkeyPatch, said: Said) -> None:
    monkeypatch.setenv(_finder.MODE_ENV, word)
    assert _activate.decide() is False
    assert [r.levelname for r in said.records] == ["INFO"]
    assert "disabled by VLLM_FUSED_MOE=off" in said.records[0].getMessage()


@pytest.mark.parametrize("word", UNKNOWN)
def test_an_unknown_word_warns_naming_the_values_and_means_on(
    word: str, monkeypatch: pytest.MonkeyPatch, said: Said
) -> None:
    monkeypatch.setenv(_finder.MODE_ENV, word)
    assert _activate.decide() is True
    warnings = [r.getMessage() for r in said.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert f"VLLM_FUSED_MOE={word.lower()!r} is not a value it knows; treating it as 'on'" in warnings[0]
    for value in ("off", "disabled", "none", "on", "enabled", "strict"):
        assert value in warnings[0].split("It takes:")[1]


# ------------------------------------------------------------------ real processes


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel's top level as the build assembles it (no build facts: the package reads the pins beside it)."""
    directory = tmp_path_factory.mktemp("site")
    stage.assemble(Layout.default(), directory, head_target(Checkout.load(Layout.default()), "").line)
    return directory


def _python(code: list[str], word: str, site: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_FUSED_MOE", "PYTHONPATH")}
    env.update({"VLLM_FUSED_MOE": word, "PYTHONPATH": str(site)})
    return subprocess.run([sys.executable, *code], capture_output=True, text=True, env=env, timeout=120, cwd=REPO)


@pytest.mark.parametrize(("word", "finder"), [("Disabled", "OverlayStandIn"), ("none", "OverlayStandIn"),
                                              ("off", "OverlayStandIn"), ("enabled", "OverlayFinder"),
                                              ("bogus", "OverlayFinder")])  # fmt: skip
def test_the_pth_line_does_not_import_the_package_for_a_word_for_off(word: str, finder: str, site: Path) -> None:
    # What site.py does at every start-up of the environment, to the .pth file as the wheel holds it.
    assert (site / project.PTH_NAME).read_text() == project.PTH_LINE
    code = (
        f"import json, site, sys; site.addsitedir({str(site)!r}); "
        "ours = sorted(m for m in sys.modules if 'fused_moe' in m); "
        "print(json.dumps([[type(f).__name__ for f in sys.meta_path], ours]))"
    )
    proc = _python(["-c", code], word, site)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    finders, ours = json.loads(proc.stdout)
    assert finders[0] == finder
    if finder == "OverlayStandIn":  # the switch was read before anything of the package was imported
        assert ours == [project.PTH_MODULE]
    else:
        assert project.PTH_MODULE in ours and "vllm_fused_moe._finder" in ours


def test_the_hook_reads_the_switchs_words_from_the_pth_module() -> None:
    """One list of words for the .pth and the hook: the package takes them from the .pth's module."""
    import _vllm_fused_moe_pth

    assert _finder.OFF_WORDS is _vllm_fused_moe_pth.OFF_WORDS and _finder.mode is _vllm_fused_moe_pth.mode


@pytest.mark.parametrize(("word", "mode"), [("DISABLED", "off"), ("none", "off"), ("yes", "on"), ("bogus", "bogus")])
def test_info_reads_the_switch_as_the_hook_does(word: str, mode: str, site: Path) -> None:
    proc = _python(["-m", "vllm_fused_moe", "info", "--json"], word, site)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["mode"] == mode
    if mode == "off":
        assert report["would_activate"] is False and report["why_not"] == "disabled by VLLM_FUSED_MOE=off"
    text = _python(["-m", "vllm_fused_moe", "info"], word, site).stdout
    assert f"VLLM_FUSED_MOE={mode}" in text
    assert ("is not a value the hook knows; it means on" in text) is (mode == "bogus"), text
