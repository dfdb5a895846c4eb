"""The doctor's verdicts in fresh venvs with real vLLM release wheels, as a user would meet them.

Venvs are made the way tests/overlay/test_activation.py makes them (tests/helpers/freshvenv.py: the
real vLLM release wheel linked in by uv, `pip install --no-deps` of our wheel from a PEP 503 index
directory that holds it, as the doctor's fix command reads it; torch and vLLM's import-time
dependencies come from the test environment). One venv per vLLM release, shared by every run on it:

- the pinned release (affected): first bare, asked from outside with `python -m release doctor`
  (exit 1 and the fix command); then the fix command it printed is run (the hash-pinned install of
  docs/overlay.md, with the test double of tests/overlay/test_user_install.py for a complete vLLM
  install: `freshvenv.requirements_met`), and the installed
  `vllm-fused-moe doctor` says 0 and live, `VLLM_FUSED_MOE=off` says 1 and names the switch;
- another affected release with the pinned release's overlay: 1, the version mismatch as reason;
- the first fixed release (`fixed_in` of the scan data): 0 not affected; with scan data as it was
  before that release existed, 2 (newer than the data);
- the newest affected release whose line has a DP-chunking switch (`dp_chunk_env` of its serve
  range in the scan data), asked from outside with `--python` given the venv's directory: a backend
  it does not have is 2 (refused); a DP-chunked backend is on the chunked path by default, off it
  with `--env VLLM_ENABLE_MOE_DP_CHUNK=0`, and a value vLLM cannot read is 2.

Releases come from data (UPSTREAM.toml and the scan data), not from this file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from helpers import REPO
from helpers.doctor import SCRIPT, doctor_module, heavy, imported, scan_data, scan_file, scan_records, validate
from helpers.failure import failed
from helpers.freshvenv import create, install_no_deps, pip_env, requirements_met, site_packages
from helpers.synthetic import impostor
from release.core.layout import Layout
from release.evidence.gather import FIXED, Evidence
from release.model.pin import Pin
from release.overlay.build import build
from release.overlay.index import publish
from release.overlay.target import BuildPlan
from release.pristine.wheel import pypi_wheel

pytestmark = [pytest.mark.slow, pytest.mark.network]  # the first fixed release is downloaded once

doctor = doctor_module()
SCAN_NAME = doctor.SCAN_NAME


def _version_key(version: str) -> Version:
    # The scan names post releases too (0.10.1.1, 0.6.6.post1): PEP 440 orders them, int() cannot.
    return Version(version)


class Releases:
    """The vLLM releases the runs need, read from the pin and the scan data."""

    def __init__(self) -> None:
        data = scan_data()
        self.data = data
        self.pinned = Pin.load(Layout.default().upstream_toml).version
        entry = data["releases"][self.pinned]
        assert entry["status"] == "affected" and entry["in_train"], (
            f"the pin {self.pinned} is not an affected train tag"
        )
        others = [
            v
            for v, e in data["releases"].items()
            if e["status"] == "affected" and e["line"] == entry["line"] and v != self.pinned
        ]
        self.other = max(others, key=_version_key)
        self.fixed = str(data["fixed_in"])
        assert data["releases"][self.fixed]["status"] == "fixed"
        scan = scan_records(data)

        def facts(version: str) -> dict[str, Any]:
            found = doctor.serve_facts(scan, data["releases"][version]["line"], version)
            said: dict[str, Any] = doctor.records.to_json(found) or {}
            return said

        switched = [
            v
            for v, e in data["releases"].items()
            if e["status"] == "affected" and (facts(v)["range"] or {}).get("dp_chunk_env")
        ]
        self.chunked = max(switched, key=_version_key)
        self.chunked_facts = facts(self.chunked)

    def before_the_fix(self) -> dict[str, Any]:
        """The scan data as it was before the first fixed release existed."""
        keep = [v for v in self.data["scanned"] if _version_key(v) < _version_key(self.fixed)]
        return {
            **self.data,
            "scanned": keep,
            "newest_scanned": keep[-1],
            "fixed_in": None,
            "patches": {name: {**p, "first_upstream": None} for name, p in self.data["patches"].items()},
            "releases": {v: e for v, e in self.data["releases"].items() if v in keep},
        }


def _overlay_wheel(tmp: Path) -> Path:
    """Our wheel, built from a copy of the checkout with the scan data in the package, as a release ships it."""
    root = tmp / "project"
    root.mkdir()
    for name in ("vendor", "patches", "release/overlay/runtime"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shipped = Layout(root).affected_json
    if not shipped.is_file():  # the scan's real file is not in the tree yet: ship the fixture
        shutil.copyfile(scan_file(), shipped)
    return build(BuildPlan(Layout(root), tmp / "dist")).wheel


def _env(mode: str | None = None) -> dict[str, str]:
    drop = ("VLLM_FUSED_MOE", "PYTHONPATH", "VLLM_PLUGINS", doctor.INDEX_ENV, "VLLM_ALL2ALL_BACKEND")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    if mode:
        env["VLLM_FUSED_MOE"] = mode
    return env


Run = tuple[dict[str, Any], subprocess.CompletedProcess[str]]


def _run(argv: list[str], mode: str | None = None) -> Run:
    proc = subprocess.run(argv, capture_output=True, text=True, env=_env(mode), timeout=400, cwd=REPO)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {}
    return report, proc


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The test's pip against the venv's interpreter (the venv has no pip of its own): `pip --python`."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), *args], capture_output=True, text=True, env=pip_env()
    )


def _break_and_fix(
    breaks: Callable[[], object], ask: Callable[[], Run], also: Callable[[], list[Run]] | None = None
) -> dict[str, Any]:
    """Break the venv, ask the doctor, run the fix it printed exactly (its argv, through `_pip`), ask again.

    A step that cannot be taken (the state before it was not repaired) is recorded, for its test to
    fail on, and the other states' tests still run."""
    try:
        breaks()
    except Exception as exc:
        return {"broken": f"the venv could not be broken this way: {exc!r}"}
    before, beside = ask(), also() if also else None
    fix = (before[0].get("fix") or {}).get("argv") or []
    if fix[1:3] == ["-m", "pip"]:
        ran: subprocess.CompletedProcess[str] | None = _pip(Path(fix[0]), *fix[3:])
    else:  # another command (the removal of an install pip cannot uninstall): as printed
        ran = subprocess.run(fix, capture_output=True, text=True) if fix else None
    return {"broken": None, "before": before, "also": beside, "fix": ran, "after": ask()}


@pytest.fixture(scope="module")
def releases() -> Releases:
    return Releases()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, releases: Releases) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("doctor")
    index = tmp / "index"
    wheel = _overlay_wheel(tmp)
    wanted = (releases.pinned, releases.other, releases.fixed, releases.chunked)
    wheels = {v: pypi_wheel(f"v{v}") for v in wanted}
    # Our wheel alone: the venvs take vLLM from the release wheels themselves, and the doctor's fix
    # installs from our project's page and requirements file. (The four vLLM wheels, 1.2 GB, were read
    # three times and copied, for nothing that reads them.)
    publish([wheel], index)
    url = index.as_uri()  # the directory publish wrote: simple/ and requirements/
    with ThreadPoolExecutor(3) as pool:
        made = {
            "pinned": pool.submit(create, tmp / "pinned", index, [], wheels[releases.pinned]),
            "other": pool.submit(create, tmp / "other", index, ["vllm-fused-moe"], wheels[releases.other]),
            "fixed": pool.submit(create, tmp / "fixed", index, [], wheels[releases.fixed]),
            "chunked": pool.submit(create, tmp / "chunked", index, [], wheels[releases.chunked]),
        }
        py = {name: str(future.result()) for name, future in made.items()}
    before = tmp / "scan-before-the-fix.json"
    before.write_text(json.dumps(releases.before_the_fix()), encoding="utf-8")

    def outside(python: str, *args: str) -> list[str]:
        # This checkout's scan data (until the scan writes it beside the doctor, the fixture).
        scan = [] if "--scan" in args else ["--scan", str(scan_file())]
        return [sys.executable, "-m", "release", "doctor", "--python", python, "--json", *scan, *args]

    def installed(python: str, *args: str) -> list[str]:
        return [str(Path(python).with_name("vllm-fused-moe")), "doctor", "--json", *args]

    def many(jobs: dict[str, Callable[[], Run]]) -> dict[str, Run]:
        with ThreadPoolExecutor(3) as pool:
            futures = {name: pool.submit(job) for name, job in jobs.items()}
            return {name: future.result() for name, future in futures.items()}

    results: dict[str, Any] = {"python": py, "url": url, "wheel": wheel}
    results |= many(
        {
            "bare": lambda: _run(outside(py["pinned"], "--index-url", url)),
            "bare-live": lambda: _run(outside(py["pinned"], "--live")),
            "bare-importtime": lambda: _run([py["pinned"], "-X", "importtime", str(SCRIPT), "--json"]),
            "mismatch": lambda: _run(installed(py["other"], "--index-url", url)),
            "upstream": lambda: _run(outside(py["fixed"], "--live")),
            "newer": lambda: _run(outside(py["fixed"], "--scan", str(before))),
        }
    )
    # The DP-chunked path of an older release, asked with the venv's directory as --python.
    span = releases.chunked_facts["range"]
    chunked_backend = span["dp_chunked"][0]
    layout = ["--", "vllm", "serve", "m", "-tp", "2", "-dp", "2", "-ep", "--all2all-backend"]
    venv_dir = str(Path(py["chunked"]).parent.parent)
    missing = next(
        b for b in ("flashinfer_nvlink_one_sided", "flashinfer_nvlink_three_sided") if b not in span["all2all_backends"]
    )
    switch = span["dp_chunk_env"]
    results["chunked-backend"] = chunked_backend
    results |= many(
        {
            "chunked-refused": lambda: _run(outside(venv_dir, *layout, missing)),
            "chunked-default": lambda: _run(outside(venv_dir, *layout, chunked_backend)),
            "chunked-off": lambda: _run(outside(venv_dir, "--env", f"{switch}=0", *layout, chunked_backend)),
            "chunked-unreadable": lambda: _run(outside(venv_dir, "--env", f"{switch}=yes", *layout, chunked_backend)),
        }
    )
    # The fix, exactly as the doctor printed it. The venv has no pip of its own, so the test's pip
    # runs the same pip arguments against the venv's interpreter (`pip --python`). The install checks
    # the installed vLLM's and FlashInfer's requirements as a user's complete install meets them:
    # FlashInfer goes into the venv itself and both lose their Requires-Dist (the test double of
    # tests/overlay/test_user_install.py, freshvenv.requirements_met), or pip would look for their CUDA stack.
    install_no_deps(Path(py["pinned"]), Pin.load(Layout.default().upstream_toml).flashinfer)
    requirements_met(Path(py["pinned"]), ["vllm", "flashinfer-python"])
    fix = (results["bare"][0].get("fix") or {}).get("argv") or []
    assert fix[:3] == [py["pinned"], "-m", "pip"], fix
    results["fix"] = subprocess.run(
        [sys.executable, "-m", "pip", "--python", fix[0], *fix[3:]], capture_output=True, text=True, env=pip_env()
    )
    serve = ["--", "vllm", "serve", "m", "-tp", "2", "--all2all-backend", "flashinfer_nvlink_two_sided"]
    _evidence_of(wheel, index, releases)
    results |= many(
        {
            "fixed": lambda: _run(installed(py["pinned"])),
            "evidence": lambda: _run(installed(py["pinned"], "--index-url", url)),
            "fixed-live": lambda: _run(installed(py["pinned"], "--live")),
            "off-live": lambda: _run(installed(py["pinned"], "--live"), mode="off"),
            "off-tp-only": lambda: _run(installed(py["pinned"], *serve), mode="off"),
            "off-by-env": lambda: _run(installed(py["pinned"], "--env", "VLLM_FUSED_MOE=off")),
            "outside-fixed": lambda: _run(outside(py["pinned"])),
            "text": lambda: _run([str(Path(py["pinned"]).with_name("vllm-fused-moe")), "doctor"]),
            "installed-importtime": lambda: _run([py["pinned"], "-X", "importtime", "-m", "vllm_fused_moe", "doctor"]),
        }
    )
    # The installs pip would keep as they are, made in the pinned venv one after another (it is fixed
    # and live here), then the overlay left behind in the venv of the fixed release: each time the
    # doctor from outside, the fix it printed run as above, and the doctor again.
    pinned, site = Path(py["pinned"]), site_packages(Path(py["pinned"]))
    version = wheel.name.split("-")[1]  # an impostor of the very version installed

    def lose_record(python: Path) -> None:
        install_no_deps(python, str(wheel))
        next(site_packages(python).glob("vllm_fused_moe-*.dist-info/RECORD")).unlink()

    def ask_pinned() -> Run:
        return _run(outside(py["pinned"], "--index-url", url))

    results["broken"] = {
        "gone": _break_and_fix(
            lambda: shutil.rmtree(site / "vllm_fused_moe"),
            ask_pinned,
            also=lambda: [
                _run([str(pinned.with_name("vllm-fused-moe")), "doctor"]),
                _run([str(pinned.with_name("vllm-fused-moe")), "doctor", "--index-url", url]),
            ],
        ),
        "impostor": _break_and_fix(
            lambda: _pip(
                pinned,
                "install",
                "--no-deps",
                "--force-reinstall",
                str(impostor(tmp / "fake", "vllm-fused-moe", version)),
            ),
            ask_pinned,
        ),
        "damaged": _break_and_fix(
            lambda: next((site / "vllm_fused_moe" / "prepare_finalize").glob("*.py")).unlink(), ask_pinned
        ),
        # The damaged states of issue 38, each fixed by what the doctor prints: pip keeps each as it is.
        "pth": _break_and_fix(lambda: (site / "vllm_fused_moe.pth").unlink(), ask_pinned),
        "build-info": _break_and_fix(lambda: (site / "vllm_fused_moe" / "_build_info.json").unlink(), ask_pinned),
        "record": _break_and_fix(lambda: next(site.glob("vllm_fused_moe-*.dist-info/RECORD")).unlink(), ask_pinned),
        "pth-module": _break_and_fix(
            lambda: (site / "_vllm_fused_moe_pth.py").unlink(),
            ask_pinned,
            also=lambda: [
                _run([str(pinned.with_name("vllm-fused-moe")), "doctor", "--json", "--index-url", url]),
                _run([str(pinned), "-m", "vllm_fused_moe", "doctor", "--json", "--index-url", url]),
            ],
        ),
        "stale": _break_and_fix(
            lambda: install_no_deps(Path(py["fixed"]), str(wheel)), lambda: _run(outside(py["fixed"]))
        ),
        # The same overlay left behind, its RECORD lost: pip uninstall refuses it, the removal is by hand.
        "stale-record": _break_and_fix(lambda: lose_record(Path(py["fixed"])), lambda: _run(outside(py["fixed"]))),
    }
    # Something else of that environment printing on stdout at start-up (a .pth): the report is still read.
    (site / "zz_says_hello.pth").write_text("import sys; print('hello from a .pth')\n", encoding="utf-8")
    results["noisy"] = ask_pinned()
    (site / "zz_says_hello.pth").unlink()
    yield results
    # About 1 GB of unpacked vLLM per venv: not worth keeping after the module.
    for name in ("pinned", "other", "fixed", "chunked"):
        shutil.rmtree(tmp / name, ignore_errors=True)


def _evidence_of(wheel: Path, index: Path, releases: Releases) -> None:
    """INDEX/evidence/<wheel>.json as the evidence stage writes it: each bug the pinned release has, fixed."""
    entry = releases.data["releases"][releases.pinned]
    bugs = [b for b, status in entry["bugs"].items() if status == "affected"]
    record = {
        "schema": 1,
        "wheel": {"name": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()},
        "vllm": {"tag": f"v{releases.pinned}", "version": releases.pinned},
        "line": entry["line"],
        "bugs": [{"bug": bug, "test": "t.py", "verdict": FIXED} for bug in bugs],
    }
    (index / "evidence").mkdir(exist_ok=True)
    (index / "evidence" / f"{wheel.name}.json").write_bytes(Evidence(wheel.name, record).text())


def _verdict(run: Run, verdict: str, code: int) -> dict[str, Any]:
    report, proc = run
    assert report, proc.stdout[-2000:] + proc.stderr[-3000:]
    validate(report)
    assert (report["verdict"], report["exit_code"], proc.returncode) == (verdict, code, code), report["summary"]
    return report


def test_affected_release_without_our_wheel_is_1_with_the_fix_command(runs: dict[str, Any], releases: Releases) -> None:
    report = _verdict(runs["bare"], "affected", 1)
    assert report["vllm"]["version"] == releases.pinned
    assert report["release"]["status"] == "affected" and report["release"]["fixed_in"] == releases.fixed
    assert report["overlay"]["installed"] is False
    python = runs["python"]["pinned"]
    assert report["fix"]["argv"] == [
        python,
        "-m",
        "pip",
        "install",
        "--no-index",
        "--find-links",
        f"{runs['url']}/simple/vllm-fused-moe/",
        "-r",
        f"{runs['url']}/requirements/vllm-{releases.pinned}.txt",
    ]
    assert report["fix"]["check"] == [python, "-m", "pip", "check"]
    # Asked from outside: the scan data of this checkout, handed to the probe.
    assert report["scan"]["source"] == "given with --scan" and report["doctor"] == str(SCRIPT)


def test_without_live_neither_torch_nor_vllm_is_imported(runs: dict[str, Any]) -> None:
    for name in ("bare-importtime", "installed-importtime"):
        _report, proc = runs[name]
        names = imported(proc.stderr)
        assert "json" in names, proc.stderr[-2000:]
        assert not heavy(names), (name, sorted(heavy(names)))
    # The installed one ran our overlay's hook at start-up (its .pth) and still imported no vLLM.
    assert "vllm_fused_moe._finder" in imported(runs["installed-importtime"][1].stderr)


def test_live_reads_upstreams_unreduced_classes_where_the_fix_is_missing(runs: dict[str, Any]) -> None:
    report = _verdict(runs["bare-live"], "affected", 1)
    classes = report["live"]["classes"]
    assert set(classes) == set(doctor.CLASSES)
    for cls in classes.values():
        assert cls["output_is_reduced"] is False and cls["served_by_overlay"] is False
        assert cls["module"].startswith("vllm.model_executor.layers.fused_moe.prepare_finalize.")
    assert report["live"]["hook_active"] is None
    # The wait is said on stderr, before and after (issue 38, 4); the first import in this fresh venv.
    stderr = runs["bare-live"][1].stderr
    assert "doctor: --live: importing vllm.model_executor." in stderr and "doctor: --live: the import took " in stderr
    # Issue 45: a line at least every 10 s while it imports (the first import was silent for up to 120 s).
    ticks = stderr.count("doctor: --live: still importing ")
    assert ticks >= int(report["live"]["seconds"] // 10) - 1, (ticks, report["live"]["seconds"], stderr[-2000:])
    print(f"first --live import in a fresh venv: {report['live']['seconds']} s, {ticks} progress lines")


def test_the_printed_fix_makes_it_fixed_and_live(runs: dict[str, Any], releases: Releases) -> None:
    assert runs["fix"].returncode == 0, runs["fix"].stderr[-2000:]
    report = _verdict(runs["fixed"], "fixed-live", 0)
    overlay = report["overlay"]
    assert overlay["installed"] and overlay["for_this_vllm"] and overlay["activates"] and overlay["hook_installed"]
    assert overlay["vllm_tag"] == f"v{releases.pinned}" and overlay["mode"] == "on"
    assert report["fix"] is None and report["live"] is None
    # Inside the installed wheel, the scan data is the one the wheel ships.
    assert report["scan"]["source"] == "shipped beside the doctor"
    assert report["scan"]["path"] == str(Path(overlay["location"]) / SCAN_NAME)


def test_live_reads_our_classes_through_vllms_own_import(runs: dict[str, Any]) -> None:
    report = _verdict(runs["fixed-live"], "fixed-live", 0)
    assert "live" in report["summary"] and "--live" in report["summary"]
    assert report["live"]["hook_active"] is True
    for cls in report["live"]["classes"].values():
        assert cls["output_is_reduced"] is True and cls["served_by_overlay"] is True
        assert cls["file"].startswith(report["overlay"]["location"] + "/prepare_finalize/")
        # Under vLLM's own module name: vLLM imports it, the hook serves our file.
        assert cls["module"].startswith("vllm.model_executor.layers.fused_moe.prepare_finalize.")
    assert 0 < report["live"]["seconds"] < 120
    print(f"--live import with our overlay: {report['live']['seconds']} s")


def test_off_is_1_and_names_the_switch(runs: dict[str, Any]) -> None:
    report = _verdict(runs["off-live"], "fixed-not-live", 1)
    assert report["overlay"]["activates"] is False and report["overlay"]["mode"] == "off"
    assert "VLLM_FUSED_MOE=off" in report["summary"]
    assert report["fix"]["command"] == "unset VLLM_FUSED_MOE"
    assert report["live"]["hook_active"] is False
    assert all(
        c["output_is_reduced"] is False and not c["served_by_overlay"] for c in report["live"]["classes"].values()
    )


def test_a_command_line_that_does_not_use_the_backend_is_0(runs: dict[str, Any]) -> None:
    report = _verdict(runs["off-tp-only"], "not-used", 0)
    assert report["serve"]["tensor_parallel_size"] == 2 and report["serve"]["uses_affected_class"] is None
    assert "--enable-expert-parallel" in report["serve"]["why"]
    # The overlay is switched off, but this command line does not need it: nothing to fix.
    assert report["fix"] is None and "fix:" not in runs["off-tp-only"][1].stdout


def test_env_is_the_serve_environment_the_overlay_switch_included(runs: dict[str, Any]) -> None:
    report = _verdict(runs["off-by-env"], "fixed-not-live", 1)
    assert report["overlay"]["mode"] == "off" and report["fix"]["command"] == "unset VLLM_FUSED_MOE"


def test_an_older_release_refuses_a_backend_it_does_not_have(runs: dict[str, Any], releases: Releases) -> None:
    report = _verdict(runs["chunked-refused"], "refused", 2)
    choices = releases.chunked_facts["range"]["all2all_backends"]
    assert report["vllm"]["version"] == releases.chunked
    assert report["summary"].startswith(f"vLLM {releases.chunked} would refuse this command line: --all2all-backend ")
    assert report["summary"].endswith("is not one of " + ", ".join(choices))
    # Asked with the venv's directory: its own interpreter answered.
    assert report["python"] == runs["python"]["chunked"]


def test_the_dp_chunked_path_follows_the_serve_environment(runs: dict[str, Any], releases: Releases) -> None:
    backend = runs["chunked-backend"]
    cls = releases.chunked_facts["builds"][backend]
    switch = releases.chunked_facts["range"]["dp_chunk_env"]
    default = _verdict(runs["chunked-default"], "affected", 1)
    assert default["serve"]["uses_affected_class"] == cls and default["serve"]["dp_chunked"] is True
    assert f"DP-chunked path ({switch} unset, default 1)" in default["serve"]["why"]
    off = _verdict(runs["chunked-off"], "affected", 1)
    assert off["serve"]["dp_chunked"] is False and off["serve"]["environment"][switch] == {
        "value": "0",
        "from": "--env",
    }
    unreadable = _verdict(runs["chunked-unreadable"], "refused", 2)
    assert f"would refuse this environment: {switch}='yes' is not an integer" in unreadable["summary"]


def test_asked_from_outside_it_sees_the_installed_overlay(runs: dict[str, Any]) -> None:
    report = _verdict(runs["outside-fixed"], "fixed-live", 0)
    assert report["overlay"]["hook_installed"] is True and report["doctor"] == str(SCRIPT)


def test_text_report_ends_with_the_verdict(runs: dict[str, Any]) -> None:
    _, proc = runs["text"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: fixed-live (exit 0)" in proc.stdout and proc.stdout.startswith("vllm-fused-moe doctor")


def test_an_overlay_for_another_release_is_1_with_the_reason(runs: dict[str, Any], releases: Releases) -> None:
    report = _verdict(runs["mismatch"], "affected", 1)
    assert report["overlay"]["installed"] and not report["overlay"]["for_this_vllm"]
    assert f"built for vLLM v{releases.pinned}, but vLLM {releases.other} is installed" in report["summary"]
    assert report["fix"]["argv"][-2:] == ["-r", f"{runs['url']}/requirements/vllm-{releases.other}.txt"]


def test_a_release_with_the_fix_upstream_is_0_not_affected(runs: dict[str, Any], releases: Releases) -> None:
    report = _verdict(runs["upstream"], "not-affected", 0)
    assert report["vllm"]["version"] == releases.fixed and report["release"]["status"] == "fixed"
    for cls in report["live"]["classes"].values():
        assert cls["output_is_reduced"] is True and cls["served_by_overlay"] is False


def test_a_vllm_newer_than_the_scan_data_is_2(runs: dict[str, Any], releases: Releases) -> None:
    report = _verdict(runs["newer"], "cannot-tell", 2)
    assert f"vLLM {releases.fixed} is newer than the newest release in the scan data" in report["summary"]
    assert report["fix"] is None


@pytest.mark.parametrize("state", ["gone", "impostor", "damaged"])
def test_an_install_pip_would_keep_is_reinstalled_by_the_printed_fix(runs: dict[str, Any], state: str) -> None:
    """The package folder deleted (its record left), an impostor of the same version, a file of ours
    removed: plain `pip install -r` answers each with `Requirement already satisfied`. The fix forces
    our wheel over it, and the doctor then says fixed-live."""
    broken = runs["broken"][state]
    assert broken["broken"] is None, broken["broken"]
    verdict = "fixed-not-live" if state == "damaged" else "affected"
    report = _verdict(broken["before"], verdict, 1)
    assert report["fix"]["argv"][3:6] == ["install", "--force-reinstall", "--no-deps"], report["fix"]
    assert report["overlay"]["reason"], report["overlay"]
    assert broken["fix"].returncode == 0, broken["fix"].stdout[-2000:] + broken["fix"].stderr[-2000:]
    assert "Successfully installed vllm-fused-moe-" in broken["fix"].stdout, broken["fix"].stdout[-2000:]
    after = _verdict(broken["after"], "fixed-live", 0)
    assert after["overlay"]["activates"] is True and after["fix"] is None


def test_the_console_script_without_its_package_names_the_repair(runs: dict[str, Any]) -> None:
    assert runs["broken"]["gone"]["broken"] is None, runs["broken"]["gone"]["broken"]
    [(_, proc), (_, given)] = runs["broken"]["gone"]["also"]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    error = failed(proc)  # the runtime's own line: no reference (it is no part of release/)
    assert (
        error.reference == "" and error.message.startswith("vllm-fused-moe ") and "--force-reinstall" in error.hint
    ), proc.stderr
    # Issue 45: run with --index-url, the hint's command names that index, not the placeholder.
    hint = failed(given).hint
    assert f"--find-links {runs['url']}/simple/vllm-fused-moe/" in hint and "<INDEX_URL>" not in hint, given.stderr


def test_the_evidence_of_the_installed_wheel_binds_to_it(runs: dict[str, Any]) -> None:
    """Issue 43: the evidence of the wheel installed here (its sha256, its files, each bug fixed): no problem."""
    report = _verdict(runs["evidence"], "fixed-live", 0)
    evidence = report["evidence"]
    assert evidence["found"] and evidence["problem"] is None, evidence
    assert evidence["wheel"] == runs["wheel"].name and evidence["bugs"], evidence


def test_an_overlay_left_behind_on_a_fixed_vllm_is_named_and_the_fix_removes_it(
    runs: dict[str, Any], releases: Releases
) -> None:
    stale = runs["broken"]["stale"]
    assert stale["broken"] is None, stale["broken"]
    report = _verdict(stale["before"], "not-affected", 0)
    assert report["overlay"]["installed"] and not report["overlay"]["for_this_vllm"]
    assert f"built for vLLM v{releases.pinned}: it serves nothing here" in report["summary"]
    assert report["fix"]["argv"][1:] == ["-m", "pip", "uninstall", "-y", "vllm-fused-moe"]
    assert stale["fix"].returncode == 0, stale["fix"].stderr[-2000:]
    after = _verdict(stale["after"], "not-affected", 0)
    assert after["overlay"]["installed"] is False and after["overlay"]["version"] is None and after["fix"] is None


@pytest.mark.parametrize(
    ("state", "verdict", "forced"),
    [
        ("pth", "fixed-not-live", "--force-reinstall"),  # the hook is never installed: vLLM runs its own file
        ("build-info", "affected", "--force-reinstall"),  # the overlay reads as a source tree carrying no patch
        ("record", "damaged", "--ignore-installed"),  # live, but pip can neither uninstall nor reinstall it: exit 1
        ("pth-module", "affected", "--force-reinstall"),  # the package no longer imports
    ],
)
def test_a_damaged_install_is_named_and_repaired_by_the_fix_as_printed(
    runs: dict[str, Any], state: str, verdict: str, forced: str
) -> None:
    """Issue 38, 1-3: a file of our install record deleted (the .pth, _build_info.json, the .pth's
    module) or the record itself lost: `pip install -r` says "Requirement already satisfied" and `pip
    check` passes. The doctor checks every file RECORD lists, names what is gone, and prints a reinstall
    that repairs it as printed; then it says fixed-live."""
    broken = runs["broken"][state]
    assert broken["broken"] is None, broken["broken"]
    report = _verdict(broken["before"], verdict, 1)  # a fix is printed: never exit 0
    assert "damaged" in report["summary"], report["summary"]
    assert report["fix"]["argv"][3:6] == ["install", forced, "--no-deps"], report["fix"]
    assert report["fix"]["argv"][-2:] == ["-r", f"{runs['url']}/requirements/{Path(report['fix']['argv'][-1]).name}"]
    assert broken["fix"].returncode == 0, broken["fix"].stdout[-2000:] + broken["fix"].stderr[-2000:]
    assert "Successfully installed vllm-fused-moe-" in broken["fix"].stdout, broken["fix"].stdout[-2000:]
    after = _verdict(broken["after"], "fixed-live", 0)
    assert after["fix"] is None and "damaged" not in after["summary"], after


def test_without_the_pth_module_the_installed_doctor_still_runs_and_names_it(runs: dict[str, Any]) -> None:
    """The console script and `python -m vllm_fused_moe doctor` with _vllm_fused_moe_pth.py deleted."""
    broken = runs["broken"]["pth-module"]
    assert broken["broken"] is None, broken["broken"]
    for run in broken["also"]:
        report = _verdict(run, "affected", 1)
        # It ran to its report (site.py's own note on the .pth line that failed aside, on stderr).
        assert "_vllm_fused_moe_pth.py" in report["summary"], report["summary"]
        assert report["fix"]["argv"][3:5] == ["install", "--force-reinstall"], report["fix"]


def test_what_an_environment_prints_at_start_up_does_not_hide_the_report(runs: dict[str, Any]) -> None:
    """A .pth of that environment printing on stdout: `release doctor --python` still reads the report,
    and warns on stderr about what it left out."""
    _verdict(runs["noisy"], "fixed-live", 0)
    assert "hello from a .pth" in runs["noisy"][1].stderr and "hello" not in runs["noisy"][1].stdout


def test_an_overlay_left_behind_without_its_record_is_removed_by_the_printed_command(runs: dict[str, Any]) -> None:
    """Issue 38, 3: RECORD lost on an overlay left behind: `pip uninstall` says "no RECORD file was
    found", and the doctor printed that uninstall again. It prints the removal of the files instead."""
    stale = runs["broken"]["stale-record"]
    assert stale["broken"] is None, stale["broken"]
    report = _verdict(stale["before"], "not-affected", 0)
    argv = report["fix"]["argv"]
    assert argv[:2] == ["rm", "-r"] and any(a.endswith(".dist-info") for a in argv), argv
    assert all("vllm_fused_moe" in a or a.endswith("/vllm-fused-moe") for a in argv[2:]), argv
    assert stale["fix"].returncode == 0, stale["fix"].stderr[-2000:]
    after = _verdict(stale["after"], "not-affected", 0)
    assert after["overlay"]["installed"] is False and after["overlay"]["version"] is None and after["fix"] is None
