"""The contracts of [tool.importlinter] (pyproject.toml) bite: an upward import, an import between two stages
of one layer, a stage in no layer, a cycle inside a package, HTTP outside the transport or a process outside its
stages breaks one.

`nox -s lint` runs `lint-imports` on the checkout; here the same contracts, read from pyproject.toml, check
the checkout's import graph (grimp's, as lint-imports builds it) with one import or module added.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import grimp
import pytest
from importlinter.api import read_configuration
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.layers import LayersContract
from importlinter.contracts.protected import ProtectedContract
from importlinter.domain.contract import Contract

from helpers import REPO

ARCHITECTURE = REPO / "docs" / "architecture.md"
TYPES: dict[str, type[Contract]] = {
    "layers": LayersContract,
    "acyclic_siblings": AcyclicSiblingsContract,
    "protected": ProtectedContract,
}


@pytest.fixture(scope="module")
def contracts() -> dict[str, Contract]:
    config = read_configuration(str(REPO / "pyproject.toml"))
    options: list[dict[str, Any]] = config["contracts_options"]
    return {
        o["id"]: TYPES[o["type"]](name=o["name"], session_options=config["session_options"], contract_options=o)
        for o in options
    }


@pytest.fixture(scope="module")
def checkout() -> grimp.ImportGraph:
    return grimp.build_graph("release", include_external_packages=True, cache_dir=None)


@pytest.fixture
def graph(checkout: grimp.ImportGraph) -> grimp.ImportGraph:
    return copy.deepcopy(checkout)


def kept(contract: Contract, graph: grimp.ImportGraph) -> bool:
    return bool(contract.check(copy.deepcopy(graph), verbose=False).kept)


def test_the_checkout_keeps_every_contract(contracts: dict[str, Contract], graph: grimp.ImportGraph) -> None:
    assert set(contracts) == {"layers", "acyclic", "network", "processes"}
    for contract in contracts.values():
        assert kept(contract, graph), contract.name


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("release.core.errors", "release.model.patch"),  # core is the bottom
        ("release.model.patch", "release.queue.load"),  # the model imports no stage
        ("release.pristine.wheel", "release.queue.drift"),  # the old pristine <-> queue cycle
        ("release.queue.replay", "release.rebase.run"),  # the replay engine serves rebase, not the reverse
        ("release.rebase.run", "release.train.add"),  # rebase and train: siblings, neither imports the other
        ("release.train.replay", "release.rebase.report"),  # ... nor the other way (the old rebase <-> train cycle)
        ("release.scan.run", "release.overlay.build"),  # the top stages are siblings too
        ("release.overlay.build", "release.cli"),  # only the entry points call the CLI
    ],
)
def test_an_import_that_does_not_point_down_breaks_the_layers(
    contracts: dict[str, Contract], graph: grimp.ImportGraph, importer: str, imported: str
) -> None:
    assert imported not in graph.find_modules_directly_imported_by(importer)
    graph.add_import(importer=importer, imported=imported)
    assert not kept(contracts["layers"], graph)


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("release.train.watch", "release.train.cli"),  # the old cycle: cli runs watch, watch called cli's add
        ("release.queue.load", "release.queue.status"),  # status reads the queue; the queue never reads status
        ("release.model.tree", "release.model.pin"),  # the pin is made from a tree, never the reverse
    ],
)
def test_a_cycle_between_the_modules_of_one_package_breaks_the_acyclic_contract(
    contracts: dict[str, Contract], graph: grimp.ImportGraph, importer: str, imported: str
) -> None:
    assert kept(contracts["acyclic"], graph)
    graph.add_import(importer=importer, imported=imported)
    assert not kept(contracts["acyclic"], graph)


def test_a_stage_in_no_layer_breaks_the_layers(contracts: dict[str, Contract], graph: grimp.ImportGraph) -> None:
    graph.add_module("release.newstage")
    graph.add_import(importer="release.newstage", imported="release.core.errors")
    assert not kept(contracts["layers"], graph)


@pytest.mark.parametrize(
    ("contract", "importer", "imported"),
    [
        ("network", "release.pristine.wheel", "requests"),  # HTTP without the transport's timeouts and retries
        ("network", "release.scan.run", "urllib3"),
        ("processes", "release.rebase.run", "subprocess"),  # git without release/core/git.py
        ("processes", "release.model.patch", "subprocess"),
    ],
)
def test_http_or_a_process_outside_its_module_breaks_its_contract(
    contracts: dict[str, Contract], graph: grimp.ImportGraph, contract: str, importer: str, imported: str
) -> None:
    graph.add_import(importer=importer, imported=imported)
    assert not kept(contracts[contract], graph)


def test_the_architecture_page_draws_the_layers_of_the_contract() -> None:
    """docs/architecture.md's diagram names, line by line from the top, the stages of each layer."""
    (layers,) = [o["layers"] for o in read_configuration(str(REPO / "pyproject.toml"))["contracts_options"]
                 if o["type"] == "layers"]  # fmt: skip
    diagram = ARCHITECTURE.read_text(encoding="utf-8").split("\n## Layers\n", 1)[1].split("```", 2)[1]
    # A layer's line starts with its stages; a line that starts with the arrow (│) carries the text on.
    columns = [re.split(r"\s{2,}", line.strip())[0] for line in diagram.splitlines() if line.strip()]
    drawn = [re.findall(r"(\w+)(?:/|\.py)", column) for column in columns if column != "│"]
    assert drawn == [[name.strip() for name in layer.split("|")] for layer in layers]


def test_each_stages_imports_line_is_what_it_imports(checkout: grimp.ImportGraph) -> None:
    """docs/architecture.md's `X imports: ...` lines name, for every stage, the stages it imports (at module level
    or in a function), as the import graph lint-imports checks has them: none left out, none made up."""
    diagram = ARCHITECTURE.read_text(encoding="utf-8").split("\n## Layers\n", 1)[1].split("```", 2)[1]
    said = {
        stage: set(re.split(r",\s*", names.strip())) for stage, names in re.findall(r"(\w+) imports: (.+)", diagram)
    }
    found: dict[str, set[str]] = {}
    for module in checkout.modules:
        parts = module.split(".")
        if parts[0] != "release" or len(parts) < 2 or module.startswith("release.overlay.runtime"):
            continue
        for imported in checkout.find_modules_directly_imported_by(module):
            target = imported.split(".")
            if target[0] == "release" and len(target) > 1 and target[1] != parts[1]:
                found.setdefault(parts[1], set()).add(target[1])
    assert said == found
