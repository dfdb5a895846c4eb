"""The command registry is the one source of exit codes: --help and docs/architecture.md say what it says."""

from __future__ import annotations

import inspect
import re

import pytest

from helpers import REPO
from helpers.doc_commands import docs
from release.cli import COMMANDS, EXIT_MEANINGS, Command, build_parser, exit_code_table
from release.core import errors

ARCHITECTURE = REPO / "docs" / "architecture.md"


def test_the_exit_code_table_in_the_docs_is_the_registry() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    found = re.search(r"<!-- exit-codes:begin[^>]*-->\n(.*?)<!-- exit-codes:end -->", text, re.S)
    assert found, "docs/architecture.md lost its exit-codes markers"
    assert found.group(1) == exit_code_table(), (
        "regenerate the table: python -c 'from release.cli import exit_code_table; print(exit_code_table())'"
    )


def test_the_table_names_every_network_command_for_4_and_every_command_for_130() -> None:
    rows = {line.split(" | ")[0].strip("| "): line for line in exit_code_table().splitlines()[2:]}
    # 4 is "the transport broke", the same from every command that reads an index, a remote or a server.
    assert rows["4"].endswith("| `rebase`, `pq`, `train`, `tags`, `scan`, `upstream-pr`, `gsm8k` |")
    assert rows["130"].endswith("| every command |")
    assert errors.PackageIndexError.exit_code == errors.RemoteError.exit_code == errors.EXIT_TRANSPORT == 4
    assert errors.CompletionRequestError.exit_code == errors.EXIT_TRANSPORT


def test_only_the_generated_table_lists_every_exit_code() -> None:
    """A list of `python -m release`'s codes written by hand goes stale when a command gains one
    (`tags` returns 4): README.md and the other docs point at the table instead of restating it."""
    restating = []
    for doc in docs(REPO):
        if doc == ARCHITECTURE:
            continue
        text = " ".join(doc.read_text(encoding="utf-8").split())
        if re.search(r"\b0 done\b.{0,80}\b1 failed\b", text):
            restating.append(doc.relative_to(REPO).as_posix())
    assert not restating, f"point to docs/architecture.md, 'Exit codes', instead: {restating}"
    maintainers = (REPO / "docs" / "maintainers.md").read_text(encoding="utf-8")
    assert "architecture.md#exit-codes" in maintainers


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.name)
def test_help_lists_exactly_the_registered_exit_codes(command: Command, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([command.name, "--help"])
    assert exited.value.code == 0
    listed = capsys.readouterr().out.split("exit codes:\n", 1)[1]
    codes = [int(line.split()[0]) for line in listed.splitlines() if re.match(r"  \d+ ", line)]
    assert codes == sorted(command.exit_codes)


def test_every_error_maps_to_a_documented_exit_code() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.ReleaseError)]
    assert len(classes) > 10
    for cls in classes:
        assert cls.exit_code in EXIT_MEANINGS, cls


def test_hints_point_at_docs_that_exist() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.ReleaseError)]
    named = {path for cls in classes for path in re.findall(r"\b[\w/.-]+\.md\b", cls.default_hint)}
    assert named, "no hint names a document any more: drop this test or the regex"
    for path in sorted(named):
        assert (REPO / path).is_file(), f"a hint points at {path}, which does not exist"
