"""Kernel tests: real FlashInfer kernels on a GPU, skipped elsewhere with the reason.

Nothing here imports torch or flashinfer at module level, so collection works on
a machine that has neither; the reason comes from kernel_probe.environment_reason().
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kernel_probe


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU and flashinfer-python (nox -s kernel)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    # Only the GPU tests: the launcher's own tests (rank double, no torch) run everywhere.
    mine = [
        item
        for item in items
        if here in Path(str(item.fspath)).resolve().parents and item.get_closest_marker("gpu") is not None
    ]
    if not mine:
        return
    reason = kernel_probe.environment_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"kernel contract not run: {reason}")
    for item in mine:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def probe() -> kernel_probe.ProbeResult:
    """The full probe (JIT build + workspaces), printed once per session."""
    result = kernel_probe.run_probe(try_backends=True)
    print("\n" + kernel_probe.format_table(result))
    return result
