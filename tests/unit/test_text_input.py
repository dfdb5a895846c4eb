"""Words and documents that are not what they look like are bad input, never a traceback.

- an argument whose bytes are not UTF-8 (`--reason $'\\xff\\xfe'`) reaches Python as lone surrogates,
  which the first write into a file or mail would fail on: refused at the CLI edge, exit 2;
- a tag written with a Unicode digit (`v٠.11.1`, ARABIC-INDIC DIGIT ZERO) is no tag: the one version
  grammar (release/core/versions.py) is ASCII;
- a PEP 691 page nested thousands of levels deep is the index's fault: exit 4, like any page that
  is not a project page.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.failure import Failure, failed
from helpers.fix import fix_patch
from release.cli import main
from release.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_TRANSPORT,
    BadInputError,
    PackageIndexError,
    TrainFileError,
    UnknownTagError,
)
from release.core.versions import canonical_tag, parse_version
from release.pristine.index import parse_project_page
from release.upstream_pr.mail import new_file_diff


def error(capsys: pytest.CaptureFixture[str]) -> Failure:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return failed(err)


FIX = fix_patch().name  # a patch of the queue: only the argument that is not UTF-8 is wrong
NOT_UTF8 = b"\xff\xfe".decode("utf-8", "surrogateescape")  # what Python makes of argv bytes that are not UTF-8


@pytest.mark.parametrize(
    "argv",
    [
        ["pq", "skip", FIX, "--line", "x", "--reason", NOT_UTF8],
        ["upstream-pr", FIX[:4], "--title-prefix", NOT_UTF8],  # the patch by its number
        ["check", NOT_UTF8],
    ],
    ids=["pq-skip-reason", "upstream-pr-title-prefix", "positional"],
)
def test_an_argument_that_is_not_utf8_is_bad_input(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main(["--root", str(project), *argv]) == EXIT_BAD_INPUT
    refused = error(capsys)
    # The message's content is the point: the argument's position and its bytes, never the bytes themselves.
    assert refused.reference == BadInputError.reference and refused.message.endswith("('\\xff\\xfe') is not UTF-8 text")


UNICODE_DIGIT = "\u0660"  # ٠, a digit to `\d` and to int(), not to PEP 440 or git


@pytest.mark.parametrize("text", [f"v{UNICODE_DIGIT}.11.1", f"0.1{UNICODE_DIGIT}.0", f"v0.11.{UNICODE_DIGIT}"])
def test_a_tag_with_a_unicode_digit_is_no_tag(text: str) -> None:
    with pytest.raises(UnknownTagError):
        canonical_tag(text)
    assert parse_version(text) is None


def test_the_train_reader_refuses_a_tag_with_a_unicode_digit(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train = project / "patches" / "train.toml"
    text = train.read_text()
    assert 'tag = "v0.' in text
    train.write_text(text.replace('tag = "v0.', f'tag = "v{UNICODE_DIGIT}.', 1))
    assert main(["--root", str(project), "train", "list"]) == EXIT_BAD_INPUT
    refused = error(capsys)
    assert refused.reference == TrainFileError.reference and "train.toml" in refused.message, refused


def test_a_deeply_nested_index_page_is_the_index_s_fault() -> None:
    page = '{"meta": {"api-version": "1.0"}, "name": "vllm", "files": ' + "[" * 5000 + "]" * 5000 + "}"
    with pytest.raises(PackageIndexError) as refused:
        parse_project_page("https://index.example/simple/vllm/", "application/vnd.pypi.simple.v1+json", page)
    assert refused.value.exit_code == EXIT_TRANSPORT and "nested too deeply" in str(refused.value)


@pytest.mark.parametrize("separator", ["\f", "\v", "\x1c", "\u2028", "\u0085"], ids=["ff", "vt", "fs", "u2028", "nel"])
def test_the_test_sent_upstream_is_the_file_proven(separator: str) -> None:
    """The section that creates the regression test holds its lines as git splits them (at LF only), so
    the file `git am` creates is the blob the mail's `index` line names, byte for byte."""
    text = f"def test_it():\n    x = 'a{separator}b'\n    assert x\n"
    diff = new_file_diff("tests/test_x.py", text)
    _, _, body = diff.partition("@@ -0,0 +1,3 @@\n")
    assert body, diff
    assert "".join(line[1:] + "\n" for line in body.split("\n")[:-1]) == text
