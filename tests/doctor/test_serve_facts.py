"""How each release line reads `vllm serve` is data (patches/lines.toml `builds` and [[line.serve]]),
shipped in the scan data the doctor reads, and it covers every affected release.

Whether the data is true to each release's own parser is tests/gsm8k/test_serve_flags.py (every
train tag's real `vllm serve` parser against `all2all_backends`); what the doctor decides with it is
tests/doctor/test_decision.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import tag_facts
from helpers.doctor import doctor_module, scan_data, scan_records
from release.core.errors import ConfigError
from release.core.layout import Layout
from release.core.versions import version_of_tag
from release.model.lines import read_lines
from release.scan.serve import read_serve

doctor = doctor_module()


def test_the_scan_data_ships_the_serve_facts_of_patches_lines_toml() -> None:
    lines = read_lines(Layout.default().lines)
    serve = read_serve(Layout.default().lines, lines)
    shipped = scan_data()["lines"]
    assert set(shipped) == set(serve), "run `nox -s scan` after changing patches/lines.toml"
    for line in lines.lines:
        assert shipped[line.name]["backends"] == list(line.backends)
        assert shipped[line.name]["builds"] == serve[line.name].builds
        assert shipped[line.name]["serve"] == [r.to_json() for r in serve[line.name].ranges]
        # Each backend of the line builds one of the classes --live reads and the fix changes.
        assert set(serve[line.name].builds) == set(line.backends)
        assert set(serve[line.name].builds.values()) <= set(line.live_classes)


def test_every_affected_release_and_train_tag_is_in_exactly_one_range_of_its_line() -> None:
    data = scan_data()
    serve = read_serve(Layout.default().lines, read_lines(Layout.default().lines))
    train = {version_of_tag(e.tag): e.line for e in tag_facts.train().entries}
    affected = {v: e["line"] for v, e in data["releases"].items() if e["status"] == "affected"}
    assert affected and set(train) <= set(affected)
    for version, line in affected.items():
        holding = [r.releases for r in serve[line].ranges if r.covers(version)]
        assert len(holding) == 1, f"vLLM {version} (line {line}) is in the ranges {holding}"
        assert train.get(version, line) == line
        # The doctor's own matcher (stdlib fallback included) finds the same range.
        found = doctor.serve_facts(scan_records(data), line, version)
        assert found is not None and found.range is not None and found.range.releases == holding[0]


@pytest.mark.parametrize(
    "specifier, version, inside",
    [(">=0.19.0,<0.20.0", "0.19.1", True), (">=0.19.0,<0.20.0", "0.20.0", False), ("==0.11.0", "0.11.0", True)],
)
def test_the_doctor_reads_a_range_without_packaging_too(
    monkeypatch: pytest.MonkeyPatch, specifier: str, version: str, inside: bool
) -> None:
    assert doctor.in_releases(version, specifier) is inside
    import builtins

    real: Callable[..., object] = builtins.__import__

    def without_packaging(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("packaging"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_packaging)
    assert doctor.in_releases(version, specifier) is inside


@pytest.mark.parametrize(
    "serve, message",
    [
        ('[[line.serve]]\nreleases = "banana"\nall2all_backends = ["a2a"]\nbackend_env = "ignored"\n', "not a PEP 440"),
        ('[[line.serve]]\nreleases = ">=1"\nall2all_backends = ["x"]\nbackend_env = "ignored"\n', "are not among"),
        ('[[line.serve]]\nreleases = ">=1"\nall2all_backends = ["a2a"]\nbackend_env = "maybe"\n', "`backend_env`"),
        (
            '[[line.serve]]\nreleases = ">=1"\nall2all_backends = ["a2a"]\nbackend_env = "ignored"\n'
            'dp_chunked = ["y"]\n',
            "`dp_chunked` names a backend",
        ),
        (
            '[[line.serve]]\nreleases = ">=1,<3"\nall2all_backends = ["a2a"]\nbackend_env = "ignored"\n'
            '[[line.serve]]\nreleases = ">=2"\nall2all_backends = ["a2a"]\nbackend_env = "ignored"\n',
            "overlap",
        ),
        ('[[line.serve]]\nreleases = ">=1"\nall2all_backends = ["a2a"]\nbackend_env = "ignored"\nfoo = 1\n', "unknown"),
    ],
)
def test_bad_serve_facts_are_refused_with_the_file_named(tmp_path: Path, serve: str, message: str) -> None:
    path = tmp_path / "lines.toml"
    path.write_text(
        '[[line]]\nname = "l"\nmodules = ["vllm/x.py"]\nbackends = ["a2a"]\n'
        'live = { module = "vllm.x", classes = ["C"] }\nbuilds = { a2a = "C" }\n' + serve,
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=message) as caught:
        read_serve(path, read_lines(path))
    assert str(path) in str(caught.value)


def test_builds_must_name_the_lines_backends_and_live_classes(tmp_path: Path) -> None:
    path = tmp_path / "lines.toml"
    path.write_text(
        '[[line]]\nname = "l"\nmodules = ["vllm/x.py"]\nbackends = ["a2a"]\n'
        'live = { module = "vllm.x", classes = ["C"] }\nbuilds = { a2a = "Head" }\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="`builds` must map exactly"):
        read_serve(path, read_lines(path))
