"""Each command's declared exit codes hold at the CLI edge: every kind of failure, raised inside every command,
leaves it with the kind's own code where the command declares it (its --help, docs/architecture.md), and
otherwise as `undeclared-exit` (exit 1) with a line naming the kind it caught."""

from __future__ import annotations

import pytest

from release.cli import COMMANDS, Command, edge
from release.core.errors import EXIT_FAILED, ReleaseError, UndeclaredExitError, kinds


def injected(kind: type[ReleaseError]) -> ReleaseError:
    """An instance of `kind` with a message of the test's, whatever its constructor asks for."""
    error = kind.__new__(kind)
    ReleaseError.__init__(error, f"injected {kind.reference}")
    return error


@pytest.mark.parametrize("command", COMMANDS, ids=[command.name for command in COMMANDS])
def test_every_kind_leaves_the_command_with_a_code_it_declares(
    command: Command, capsys: pytest.CaptureFixture[str]
) -> None:
    for kind in kinds():

        def run(kind: type[ReleaseError] = kind) -> int:
            raise injected(kind)

        code = edge(lambda: command.name, run)
        err = capsys.readouterr().err
        assert code in command.exit_codes, (command.name, kind, code)
        if kind.exit_code in command.exit_codes:
            assert code == kind.exit_code, (command.name, kind)
            assert err.startswith(f"error[{kind.reference}]: injected {kind.reference}"), err
        else:
            assert code == EXIT_FAILED, (command.name, kind)
            assert err.startswith(
                f"error[{UndeclaredExitError.reference}]: {command.name} raised {kind.reference} "
                f"(exit {kind.exit_code}), "
            ), err
            assert f"injected {kind.reference}" in err
