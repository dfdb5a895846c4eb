"""Each release line's proving environment (release/evidence/envs.py): its data and its content digest."""

from __future__ import annotations

from pathlib import Path

from helpers import REPO
from release.core.errors import BadInputError
from release.core.layout import Layout
from release.evidence import envs
from release.model.lines import read_lines


def test_every_release_line_has_a_hash_pinned_proving_environment() -> None:
    """publish and evidence make each line's environment from envs/lines.toml, and the contract sessions
    install the same file: a line without one could not be proven (issue 44: 0.16.0 lacked msgspec)."""
    layout = Layout(REPO)
    for line in read_lines(layout.lines).lines:
        spec = envs.line_env(layout, line.name)
        pinned = [text for text in spec.requirements.read_text().splitlines() if text and text[0].isalnum()]
        assert pinned and all("==" in text for text in pinned), spec.requirements
        assert "--hash=sha256:" in spec.requirements.read_text()
        names = {text.split("==")[0] for text in pinned}
        assert {"torch", "pytest", "pip"} <= names, (line.name, sorted(names))


def test_an_unknown_line_is_bad_input_naming_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "lines.toml").write_text('[line.a]\nrequirements = "a.txt"\n')
    try:
        envs.line_env(Layout(tmp_path), "b")
    except BadInputError as exc:
        assert "no proving environment for release line b (it has: a)" in str(exc)
    else:
        raise AssertionError("an unknown line was accepted")


def test_the_content_digest_follows_what_is_installed_not_where(tmp_path: Path) -> None:
    """The evidence cache keys a run by the environment's content digest (issue 43: after pytest and torch were
    uninstalled, publish still passed from the cache): the same dists in two places give one digest, one
    dist more or changed gives another."""
    first, second = tmp_path / "a", tmp_path / "b"
    for site in (first, second):
        info = site / "pkg-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "RECORD").write_text("pkg/__init__.py,sha256=abc,1\n")
    assert envs.content_digest("3.11.7", [first]) == envs.content_digest("3.11.7", [second])
    assert envs.content_digest("3.11.7", [first]) != envs.content_digest("3.12.0", [first])
    (second / "pkg-1.0.dist-info" / "RECORD").write_text("pkg/__init__.py,sha256=abd,1\n")
    assert envs.content_digest("3.11.7", [first]) != envs.content_digest("3.11.7", [second])
    before = envs.content_digest("3.11.7", [first])
    (first / "other-2.0.dist-info").mkdir()
    (first / "other-2.0.dist-info" / "METADATA").write_text("Name: other\n")
    assert envs.content_digest("3.11.7", [first]) != before
