"""The command registry is the one source of exit codes: --help and docs/architecture.md say what it says."""

from __future__ import annotations

import dataclasses
import inspect
import re
from types import ModuleType
from typing import Any

import grimp
import pytest

from helpers import REPO
from helpers.doc_commands import docs
from helpers.failure import failed
from release.cli import COMMANDS, EXIT_MEANINGS, Command, build_parser, exit_code_table, main
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
    assert rows["4"].endswith(
        "| `rebase`, `pq`, `train`, `tags`, `scan`, `build`, `publish`, `evidence`, `upstream-pr`, `gsm8k` |"
    )
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


def test_each_command_is_one_module_of_its_stage_named_by_one_rule() -> None:
    """The stage's cli.py for the command named after the stage, <command>_cli.py for its other commands."""
    wired = {}
    for command in COMMANDS:
        module = command.load()
        assert isinstance(module, ModuleType), command.name  # a module, as the table's loaders import it
        _, stage, leaf = module.__name__.split(".")
        own = command.name.replace("-", "_")
        assert (own, "cli") == (stage, leaf) or leaf == f"{own}_cli", (command.name, module.__name__)
        assert callable(module.configure) and callable(module.run), module.__name__
        wired[module.__name__] = command.name
    # No command module outside the table, and the table names each module by a plain import (the edge
    # import-linter checks and a reader follows), not by a string.
    files = {".".join(p.relative_to(REPO).with_suffix("").parts) for p in (REPO / "release").glob("*/*cli.py")}
    assert files == set(wired)
    graph = grimp.build_graph("release", cache_dir=None)
    assert set(wired) <= graph.find_modules_directly_imported_by("release.cli")


def test_a_missing_dependency_is_one_error_and_one_hint_saying_how_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing() -> Any:
        raise ModuleNotFoundError("No module named 'tomli_w'", name="tomli_w")

    check = next(command for command in COMMANDS if command.name == "check")
    monkeypatch.setattr("release.cli.COMMANDS", (dataclasses.replace(check, load=missing),))
    assert main(["check"]) == errors.ModuleMissingError.exit_code == errors.EXIT_FAILED
    said = capsys.readouterr().err
    error = failed(said)
    assert len(said.splitlines()) == 2 and error.reference == errors.ModuleMissingError.reference
    assert error.message.startswith("the tooling needs the Python module 'tomli_w', which ")
    hint = error.hint
    assert hint.startswith("install the tooling") and "--group tooling" in hint and "pipx install ." in hint
    # Stock pip before 25.1 refuses --group: the hint says so, as the README's set-up does.
    assert 'pip install "pip>=25.1"' in hint, hint


def test_a_rebase_from_the_default_source_that_cannot_reach_it_points_to_pypi(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, 6: `rebase TAG` without --from reads vLLM's git repository; where that does not answer
    (no DNS), "run it again" is no way forward, `--from pypi` may be. A test double stands for the
    network that fails (no network in this tier): the rebase raises what the git source raises."""
    import release.rebase.run as rebase_run
    from release.model.source import DEFAULT_GIT_URL

    def unreachable(options: Any) -> Any:
        raise errors.TransportError(f"cannot fetch v9.9.9 from {DEFAULT_GIT_URL}: Could not resolve host")

    monkeypatch.setattr(rebase_run, "rebase", unreachable)
    assert main(["rebase", "v9.9.9"]) == errors.EXIT_TRANSPORT
    error = failed(capsys.readouterr().err)
    assert error.reference == errors.TransportError.reference and "--from pypi" in error.hint, error
    assert main(["rebase", "v9.9.9", "--from", "pypi"]) == errors.EXIT_TRANSPORT  # --from given: its own hint
    assert "--from pypi" not in capsys.readouterr().err


def test_the_doctor_help_has_one_table_of_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38, 8: `doctor --help` printed the doctor's codes and the generic table, which disagreed."""
    with pytest.raises(SystemExit):
        main(["doctor", "--help"])
    text = capsys.readouterr().out
    assert text.count("exit codes") == 1, text
    table = text.split("exit codes:", 1)[1]
    assert "affected and not fixed" in table and "cannot tell" in table and "check found drift" not in table


def test_publish_help_is_short_and_names_only_the_documented_install(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38, 8: publish --help said users install "with --index-url" (the docs install with
    --no-index --find-links and a requirements file) in a 20-line paragraph; the rules live in
    docs/overlay.md, "The index"."""
    with pytest.raises(SystemExit):
        main(["publish", "--help"])
    text = capsys.readouterr().out
    description = text.split("\n\n", 2)[1]
    assert len(description.splitlines()) <= 10, description
    assert "--index-url" not in text and "--no-index --find-links" in description, description
    assert "docs/overlay.md, 'The index'" in description
