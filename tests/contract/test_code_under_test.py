"""One contract run covers a group of train tags only where their code under test is identical."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from helpers import tag_facts
from moe_contract.code_under_test import (
    differing_functions,
    flashinfer_module_files,
    function_source,
    group_of,
    installed_files,
    load_groups,
    load_not_yet_driven,
    wheel_files,
    wheel_metadata,
)
from moe_contract.launcher import ContractRun
from release.pristine.wheel import pypi_wheel

pytestmark = pytest.mark.timeout(900)  # the first test of a layout pays for the run (contract_run)


def _vllm_package() -> Path:
    # Located, not imported: importing vLLM here would configure its logging in the pytest
    # process, against whatever stream the capture had at that moment.
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.mark.any_release
def test_every_train_tag_is_in_exactly_one_group() -> None:
    groups = load_groups()
    listed = [tag for group in groups for tag in group.tags]
    assert len(listed) == len(set(listed)), f"a tag is in two groups: {listed}"
    not_yet = load_not_yet_driven()
    assert not set(not_yet) & set(listed), "a tag the harness drives is still listed as not_yet"
    assert all(why.strip() for why in not_yet.values())
    missing = [tag for tag in tag_facts.train().tags if tag not in listed and tag not in not_yet]
    assert not missing, f"add {missing} to tests/contract/groups.toml (a group of its own unless proven identical)"


def test_the_run_reached_the_reduce_decision_of_the_installed_release(contract_run: ContractRun) -> None:
    site = contract_run.site  # what the ranks found in the installed vLLM (vllm_layer.reduce_site)
    assert (_vllm_package().parent / str(site["file"])).is_file()
    runner_functions = {qualname for file, qualname in contract_run.vllm_functions if file == site["file"]}
    # The decision itself ran, not just the runner's constructor.
    assert site["decision"] in runner_functions, sorted(runner_functions)


@pytest.mark.network  # the other members' release wheels come from the package index once, then the cache
def test_the_other_tags_of_this_group_have_the_same_code_under_test(contract_run: ContractRun) -> None:
    installed = tag_facts.tag_of_installed_vllm()
    group = group_of(installed, load_groups())
    assert group is not None, f"{installed} is in no group of tests/contract/groups.toml"
    functions = list(contract_run.vllm_functions)
    names = {file for file, _ in functions} | set(flashinfer_module_files())
    ours = installed_files(_vllm_package(), names)
    our_flashinfer = tag_facts.installed_vllm_flashinfer_requirement()
    for member in group.tags:
        if member == installed:
            continue
        wheel = pypi_wheel(member)
        theirs = wheel_files(wheel, names)
        assert differing_functions(ours, theirs, functions) == [], f"{member} runs other code than {installed}"
        for name in flashinfer_module_files():
            assert theirs[name] == ours[name], f"{member}'s {name} differs from {installed}'s"
        assert tag_facts.flashinfer_requirement(wheel_metadata(wheel)) == our_flashinfer


@pytest.mark.any_release
def test_function_source_tells_a_changed_function_from_a_changed_neighbour() -> None:
    before = "import os\n\nclass A:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n"
    neighbour_changed = before.replace("return 2", "return 3")
    assert function_source(before, "A.f") == function_source(neighbour_changed, "A.f")
    assert function_source(before, "A.g") != function_source(neighbour_changed, "A.g")
    decorated = before.replace("    def f", "    @property\n    def f")
    assert function_source(before, "A.f") != function_source(decorated, "A.f")
    # A lambda is compared through the function that holds it.
    assert function_source(before, "A.g.<locals>.<lambda>") == function_source(before, "A.g")
    assert differing_functions({"m.py": before.encode()}, {"m.py": neighbour_changed.encode()}, [("m.py", "A.f")]) == []
    assert differing_functions({"m.py": before.encode()}, {}, [("m.py", "A.f")]) == ["m.py: only in one release"]


@pytest.mark.any_release
def test_a_module_level_lambda_is_compared_by_its_own_text() -> None:
    ours = 'import os\nA = {\n    "X": lambda: os.getenv("X"),\n    "Y": lambda: os.getenv("Y", "1"),\n}\n'
    moved = "# a new first line\n" + ours.replace('"Y", "1"', '"Y", "2"')  # Y changed, X moved a line
    x, y = ("m.py", "<lambda>@3"), ("m.py", "<lambda>@4")
    assert differing_functions({"m.py": ours.encode()}, {"m.py": moved.encode()}, [x]) == []
    assert differing_functions({"m.py": ours.encode()}, {"m.py": moved.encode()}, [y]) == ["m.py: <lambda>@4"]
