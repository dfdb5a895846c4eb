"""tests/conftest.py hands pytest-xdist whole test files, or whole users of a shared expensive fixture.

`nox -s test` runs the suite with `-n auto --dist loadgroup --no-loadscope-reorder`: a module
fixture (a venv with vLLM, an index, a probe of every tag) must be made on one worker only, the
multi-process contract runs once per run, and the long poles must be handed out first. A small
suite is collected in this process (pytester, no worker is started) and the hook is called on it.
"""

from __future__ import annotations

import pytest

from tests.conftest import SHARED_ON_ONE_WORKER, _group, pytest_collection_modifyitems

SUITE = {
    "test_a.py": "def test_one():\n    pass\n\ndef test_two():\n    pass\n",
    "test_b.py": (
        "import pytest\n\n@pytest.fixture\ndef contract_run():\n    return 1\n\n"
        "def test_plain():\n    pass\n\ndef test_shared(contract_run):\n    pass\n"
    ),
    "test_c.py": "import pytest\n\npytestmark = pytest.mark.slow\n\ndef test_long():\n    pass\n",
    "test_d.py": (
        "import pytest\n\n@pytest.mark.xdist_group('chosen')\ndef test_grouped():\n    pass\n\n"
        "def test_free():\n    pass\n"
    ),
}


def groups(pytester: pytest.Pytester, worker: bool) -> list[tuple[str, str]]:
    pytester.makepyfile(**SUITE)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n    xdist_group: group\n")
    items = pytester.getitems(pytester.path)  # every file of the suite, collected in this process
    config = items[0].config
    if worker:
        config.workerinput = {}  # type: ignore[attr-defined]  # what pytest-xdist sets on a worker
    pytest_collection_modifyitems(config, items)
    return [(item.nodeid.partition("::")[2], _group(item)) for item in items]


def test_each_file_is_one_group_and_a_shared_expensive_fixture_one_more(pytester: pytest.Pytester) -> None:
    assert groups(pytester, worker=False) == [
        ("test_one", "test_a.py"),
        ("test_two", "test_a.py"),
        ("test_plain", "test_b.py"),
        ("test_shared", SHARED_ON_ONE_WORKER["contract_run"]),
        ("test_long", "test_c.py"),
        ("test_grouped", "chosen"),  # a group a test names itself is kept
        ("test_free", "test_d.py"),
    ]


def test_on_a_worker_the_long_poles_come_first_and_keep_their_order(pytester: pytest.Pytester) -> None:
    assert [name for name, _ in groups(pytester, worker=True)] == [
        "test_shared",  # the contract runs
        "test_long",  # a file with a `slow` test
        "test_one",
        "test_two",
        "test_plain",
        "test_grouped",
        "test_free",
    ]
