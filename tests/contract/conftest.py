"""Fixtures for the reduce-contract suite: source variants and one multi-process run per layout."""

import pytest

from moe_contract.cases import LAYOUTS, problems_for
from moe_contract.launcher import ContractRun, run_contract
from moe_contract.layout import ParallelLayout
from moe_contract.paths import release_line
from moe_contract.prepare_finalize_sources import (
    SourceVariant,
    mutant_variant,
    pristine_variant,
    vendored_variant,
)


@pytest.fixture(scope="session")
def source_variants(tmp_path_factory: pytest.TempPathFactory) -> tuple[SourceVariant, ...]:
    workdir = tmp_path_factory.mktemp("prepare_finalize_sources")
    vendored = vendored_variant(workdir)
    return (
        vendored,
        pristine_variant(workdir),
        *(mutant_variant(workdir, module, vendored) for module in release_line().modules),
    )


@pytest.fixture(scope="session", params=LAYOUTS, ids=lambda layout: layout.name)
def contract_run(
    request: pytest.FixtureRequest,
    source_variants: tuple[SourceVariant, ...],
    tmp_path_factory: pytest.TempPathFactory,
) -> ContractRun:
    layout: ParallelLayout = request.param
    return run_contract(layout, problems_for(layout), source_variants, tmp_path_factory.mktemp(layout.name))
