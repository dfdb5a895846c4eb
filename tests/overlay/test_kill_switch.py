"""`VLLM_FUSED_MOE=off` works whatever is broken, and the `.pth` line never prints at start-up.

Real venvs with our wheel from our index (tests/helpers/freshvenv.py), then damaged the way
installs get damaged: a corrupt build-info file, a module that no longer imports, files
half removed, the package gone with its `.pth` left behind. Each is run as real
interpreters: a bare `python -c` (every process of the environment runs the `.pth`), and
one that imports vLLM's subtree in each mode where the damage can change what it does.

With `off` the `.pth` imports nothing of the package, whatever state it is in, so no damage can
change what vLLM's import does (the wheel declares no vLLM plugin: only the `.pth` reaches the
package): a bare interpreter shows that for every damage (no module of the package loaded, the
stand-in in the finder's place, answering nothing for the subtree, so the path finder serves
vLLM's own files). Where that stand-in leaves a vLLM import, upstream's files and its one INFO
line, is test_activation.py's test_an_operators_word_for_off_leaves_upstream_in_place: a vLLM
import here per damage (seven, seconds of CPU each) would run the same code again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from helpers.freshvenv import create, site_packages

pytestmark = pytest.mark.slow

TARGET = "vllm.model_executor.layers.fused_moe.prepare_finalize"
PROBE = f"""
import json, sys
try:
    import {TARGET} as module
    print(json.dumps({{"file": module.__file__}}))
except BaseException as exc:
    print(json.dumps({{"error": type(exc).__name__ + ": " + str(exc)}}))
"""


def _corrupt_build_info(package: Path) -> None:
    (package / "_build_info.json").write_text('{"version": "0.20.0+fm.1", "vllm_t')


def _broken_module(package: Path) -> None:
    (package / "_activate.py").write_text("raise RuntimeError('broken on purpose')\n")


def _no_finder(package: Path) -> None:
    (package / "_finder.py").unlink()


def _no_package(package: Path) -> None:
    shutil.rmtree(package)


def _no_subtree(package: Path) -> None:
    shutil.rmtree(package / "prepare_finalize")


def _served(package: Path) -> tuple[str, Path]:
    """The first package the build serves: its upstream name and our folder (from the build info)."""
    name, rel = next(iter(json.loads((package / "_build_info.json").read_text())["targets"].items()))
    return name, package / rel.rstrip("/")


def _one_module_gone(package: Path) -> None:
    # A module the served package's __init__ imports: the package is there, one of its modules is not.
    name, folder = _served(package)
    found = re.search(rf"^from {re.escape(name)}\.(\w+) import", (folder / "__init__.py").read_text(), re.M)
    assert found, "the served package's __init__ imports none of its modules"
    (folder / f"{found.group(1)}.py").unlink()


def _module_changed(package: Path) -> None:
    # Bytes nobody built: a module that still imports, edited after the install.
    module = sorted(_served(package)[1].glob("*.py"))[-1]
    module.write_text(module.read_text() + "# edited after the install\n")


DAMAGE = {
    f.__name__.lstrip("_"): f
    for f in (
        _corrupt_build_info,
        _broken_module,
        _no_finder,
        _no_package,
        _no_subtree,
        _one_module_gone,
        _module_changed,
    )
}
# Which runs import vLLM (each takes seconds): on and strict for each way the hook breaks (the finder fails
# to decide; the .pth cannot install the finder; our files are gone or not ours). Never off: with off the .pth
# imports nothing of the package, whatever is damaged (test_off_imports_nothing_of_the_package_whatever_is_broken).
ON = ("corrupt_build_info", "no_package", "no_subtree", "one_module_gone", "module_changed")
STRICT = ("broken_module", "no_finder", "no_subtree", "one_module_gone")
# An intact install under a word the hook does not know. (An operator's word for off on an intact
# install, `disabled`: test_activation.py's off run, in a venv with its own vLLM.)
WORDS = ("bogus",)
VLLM_RUNS = [(d, "on") for d in ON] + [(d, "strict") for d in STRICT] + [("intact", w) for w in WORDS]


def _env(mode: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_FUSED_MOE", "PYTHONPATH", "VLLM_PLUGINS")}
    if mode:
        env["VLLM_FUSED_MOE"] = mode
    return env


def _python(python: Path, code: str, mode: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, env=_env(mode), timeout=400, cwd=python.parent
    )


@pytest.fixture(scope="module")
def damaged(index: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("damaged")
    pristine = create(root / "intact", index, ["vllm-fused-moe"])
    pythons = {}
    for name, damage in DAMAGE.items():
        copy = root / name
        shutil.copytree(root / "intact", copy, symlinks=True)
        python = copy / "bin" / "python"
        damage(site_packages(python) / "vllm_fused_moe")
        pythons[name] = python
    assert pristine.is_file()
    return {**pythons, "intact": pristine}


@pytest.fixture(scope="module")
def vllm_runs(damaged: dict[str, Path]) -> dict[tuple[str, str], tuple[dict[str, Any], str]]:
    # (result, stdout + stderr) of each run in VLLM_RUNS
    def one(damage: str, mode: str) -> tuple[dict[str, Any], str]:
        proc = _python(damaged[damage], PROBE, mode)
        last = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        # vLLM logs to stdout; our warnings go through its logging, or to stderr before it is configured.
        return (json.loads(last[-1]) if last else {"rc": proc.returncode}), proc.stdout + proc.stderr

    with ThreadPoolExecutor(3) as pool:
        futures = {run: pool.submit(one, *run) for run in VLLM_RUNS}
        return {run: future.result() for run, future in futures.items()}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("mode", [None, "off", "strict"])
def test_the_pth_line_never_prints_at_interpreter_start(damaged: dict[str, Path], damage: str, mode: str) -> None:
    proc = _python(damaged[damage], "print('started')", mode)
    assert proc.returncode == 0 and proc.stdout == "started\n"
    assert proc.stderr == "", proc.stderr


# In a bare interpreter with VLLM_FUSED_MOE=off: the package's modules the .pth loaded, the finders of ours on
# sys.meta_path (class and the stand-in's reason), and what each answers for the subtree vLLM imports.
OFF_PROBE = f"""
import json, sys
loaded = lambda: sorted(m for m in sys.modules if m.split(".")[0] == "vllm_fused_moe")
at_start = loaded()
ours = [f for f in sys.meta_path if "vllm_fused_moe" in type(f).__module__]
print(json.dumps({{
    "at_start": at_start,
    "finders": [[type(f).__module__, type(f).__name__, getattr(f, "why", None)] for f in ours],
    "answers": [repr(f.find_spec("{TARGET}", None, None)) for f in ours],
    "after": loaded(),
}}))
"""


@pytest.mark.parametrize("damage", DAMAGE)
def test_off_imports_nothing_of_the_package_whatever_is_broken(damaged: dict[str, Path], damage: str) -> None:
    proc = _python(damaged[damage], OFF_PROBE, "off")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["at_start"] == [] and seen["after"] == [], seen
    # The .pth ran (its stand-in is there, off) and nothing of ours serves the subtree: the path finder does.
    assert seen["finders"] == [["_vllm_fused_moe_pth", "OverlayStandIn", "off"]], seen
    assert seen["answers"] == ["None"], seen


@pytest.mark.parametrize("damage", ON)
def test_on_falls_back_to_upstream_and_warns_once(
    vllm_runs: dict[tuple[str, str], tuple[dict[str, Any], str]], damage: str
) -> None:
    result, stderr = vllm_runs[(damage, "on")]
    assert "error" not in result, (result, stderr[-2000:])
    assert "vllm_fused_moe" not in result["file"]
    warnings = [line for line in stderr.splitlines() if "vllm-fused-moe" in line and "upstream" in line]
    assert len(warnings) == 1, stderr[-3000:]
    assert "Traceback" not in stderr


@pytest.mark.parametrize("damage", STRICT)
def test_strict_fails_loudly_inside_vllm(
    vllm_runs: dict[tuple[str, str], tuple[dict[str, Any], str]], damage: str
) -> None:
    result, stderr = vllm_runs[(damage, "strict")]
    assert result.get("error", "").split(":")[0] in ("ImportError", "OverlayMismatchError"), (result, stderr[-2000:])
    assert "vllm-fused-moe" in result["error"] and "strict" in result["error"]


def test_an_unknown_word_warns_naming_the_values_and_serves_ours(
    vllm_runs: dict[tuple[str, str], tuple[dict[str, Any], str]],
) -> None:
    result, output = vllm_runs[("intact", "bogus")]
    assert "error" not in result, (result, output[-2000:])
    assert "vllm_fused_moe" in result["file"]
    warnings = [line for line in output.splitlines() if "VLLM_FUSED_MOE='bogus' is not a value it knows" in line]
    assert len(warnings) == 1, output[-3000:]
    assert "It takes: off (" in warnings[0] and "strict" in warnings[0]


@pytest.mark.parametrize("damage", ["one_module_gone", "module_changed"])
def test_a_damaged_subtree_names_the_file_in_its_one_warning(
    vllm_runs: dict[tuple[str, str], tuple[dict[str, Any], str]], damage: str
) -> None:
    _result, output = vllm_runs[(damage, "on")]
    assert "the overlay's files are damaged in " in output and "reinstall vllm-fused-moe" in output, output[-3000:]
    assert "activated" not in output
