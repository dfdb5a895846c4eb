"""One word per fact: a `--from` source is parsed once into a Source, and every stage says a patch's status
in the words of one enum, the words the shipped scan document holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.failure import failed
from release.cli import main
from release.core.errors import EXIT_BAD_INPUT, SourceError
from release.model.source import DEFAULT_SOURCE, Source, SourceKind


@pytest.mark.parametrize(
    ("text", "kind", "location"),
    [
        ("pypi", SourceKind.PYPI, ""),
        ("wheel:/cache/vllm-0.20.0-cp38-abi3-manylinux1_x86_64.whl", SourceKind.WHEEL,
         "/cache/vllm-0.20.0-cp38-abi3-manylinux1_x86_64.whl"),
        ("wheel:vllm-0.20.0-cp38-abi3-manylinux1_x86_64.whl", SourceKind.WHEEL,
         "vllm-0.20.0-cp38-abi3-manylinux1_x86_64.whl"),
        ("dir:../vllm", SourceKind.DIR, "../vllm"),
        ("git:/src/vllm", SourceKind.GIT, "/src/vllm"),
        (DEFAULT_SOURCE, SourceKind.GIT_URL, "https://github.com/vllm-project/vllm.git"),
        ("git+http://mirror.example/vllm.git", SourceKind.GIT_URL, "http://mirror.example/vllm.git"),
        ("git+file:///srv/vllm", SourceKind.GIT_URL, "file:///srv/vllm"),
        ("git+ssh://git@host/vllm.git", SourceKind.GIT_URL, "ssh://git@host/vllm.git"),
    ],
)  # fmt: skip
def test_every_from_form_parses_to_its_kind_and_reads_back_as_written(
    text: str, kind: SourceKind, location: str
) -> None:
    source = Source.parse(text)
    assert (source.kind, source.location) == (kind, location)
    assert str(source) == text  # what reports, UPSTREAM.toml and the train record


@pytest.mark.parametrize(
    "text", ["", "PyPI", "pypi:", "wheel:", "dir", "git:", "git+ftp://host/vllm.git", "svn:/x", DEFAULT_SOURCE[4:]]
)
def test_a_source_no_reader_takes_is_bad_input(text: str) -> None:
    with pytest.raises(SourceError, match="unknown source") as refused:
        Source.parse(text)
    assert refused.value.exit_code == EXIT_BAD_INPUT


def test_a_wheel_is_recorded_by_its_name_every_other_source_as_it_is() -> None:
    assert (
        str(Source.parse("wheel:/tmp/dl/vllm-0.20.0-cp38-abi3-any.whl").recorded())
        == "wheel:vllm-0.20.0-cp38-abi3-any.whl"
    )
    for text in ("pypi", "dir:/src/vllm", "git:/src/vllm", DEFAULT_SOURCE):
        assert str(Source.parse(text).recorded()) == text


def test_rebase_refuses_an_unknown_source_before_it_touches_the_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Parsed at the command line: no lock taken, no queue read, nothing written (an empty --root stays empty)."""
    code = main(["--root", str(tmp_path), "rebase", "v0.20.0", "--from", "https://github.com/vllm-project/vllm"])
    assert code == EXIT_BAD_INPUT
    error = failed(capsys.readouterr().err)
    assert error.reference == SourceError.reference and "'https://github.com/vllm-project/vllm'" in error.message
    assert list(tmp_path.iterdir()) == []
