"""In-process checks of what the index may name and how long any network read may take.

The end-to-end attacks (a traversal name, a tampered wheel, a broken transport, through the CLI)
are in tests/e2e/test_index_trust.py; the rules against a loopback address or server (the cache
read offline, a dripping completions server) in tests/cli/test_index_trust.py; here the rules
themselves, on real names.
"""

from __future__ import annotations

import json

import pytest

from release.core.errors import EXIT_TRANSPORT, BadInputError, PackageIndexError, UnsafeIndexError
from release.pristine import transport
from release.pristine.index import IndexFile, checked_name, parse_project_page, wheels_on

# Names as PyPI lists them for vllm (a build tag, manylinux tags old and new, a post release, per-CPython).
REAL = [
    ("vllm-0.21.0-1-cp38-abi3-manylinux_2_24_x86_64.whl", "0.21.0"),
    ("vllm-0.20.0-cp38-abi3-manylinux_2_35_x86_64.whl", "0.20.0"),
    ("vllm-0.6.1.post1-cp38-abi3-manylinux1_x86_64.whl", "0.6.1.post1"),
    ("vllm-0.1.4-cp310-cp310-manylinux1_x86_64.whl", "0.1.4"),
    ("vllm-0.10.1.1-cp38-abi3-manylinux1_x86_64.whl", "0.10.1.1"),
]
REFUSED = {
    "a parent in the build tag": ("vllm-0.21.0-1/../../../../x-cp38-abi3-any.whl", "is not a base name"),
    "an absolute name": ("/tmp/vllm-0.21.0-cp38-abi3-any.whl", "is not a base name"),
    "a backslash": ("..\\vllm-0.21.0-cp38-abi3-any.whl", "path separator"),
    "a parent alone": ("..", "is not a base name"),
    "another project": ("torch-0.21.0-cp38-abi3-any.whl", "is not a wheel of vllm"),
    "a name spelled otherwise": ("VLLM-0.21.0-cp38-abi3-any.whl", "is not a wheel file name"),
    "a version not canonical": ("vllm-0.21.0.post01-cp38-abi3-any.whl", "does not spell its version canonically"),
    "another version": ("vllm-0.20.0-cp38-abi3-any.whl", "is not a wheel of vllm 0.21.0"),
    "an sdist": ("vllm-0.21.0.tar.gz", "is not a wheel file name"),
}


@pytest.mark.parametrize(("name", "version"), REAL)
def test_real_release_names_pass(name: str, version: str) -> None:
    assert checked_name(name, version) == name


@pytest.mark.parametrize(("name", "why"), REFUSED.values(), ids=REFUSED.keys())
def test_a_name_that_is_no_canonical_base_name_of_the_release_asked_is_exit_2(name: str, why: str) -> None:
    with pytest.raises(UnsafeIndexError, match=why) as refused:
        checked_name(name, "0.21.0")
    assert refused.value.exit_code == 2


@pytest.mark.parametrize("value", ["soon", "-1", "0"])
def test_a_wait_setting_that_is_no_positive_number_is_bad_input(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(transport.DEADLINE_ENV, value)
    with pytest.raises(BadInputError, match=transport.DEADLINE_ENV):
        transport.settings()


# ------------------------------------------------------------------ one reader of index pages

SHA = "ab" * 32
WHEEL = "vllm-0.21.0-1-cp38-abi3-manylinux_2_24_x86_64.whl"
JSON_FILE = {"filename": WHEEL, "url": "../../files/a/" + WHEEL, "hashes": {"sha256": SHA}, "yanked": "broken"}
JSON_PAGE = {
    "meta": {"api-version": "1.1"},
    "name": "vllm",
    "files": [
        JSON_FILE,
        {"filename": "vllm-0.21.0.tar.gz", "url": "../../files/b/vllm-0.21.0.tar.gz", "hashes": {"sha256": SHA}},
    ],
}
# The same page as a mirror may write its HTML: single quotes, upper-case tags, the name inside a span,
# an entity in the URL, a bare `data-yanked`. The regexes this reader replaced found no wheel on it.
HTML_PAGE = f"""<!DOCTYPE html><html><body>
<A HREF='../../files/a/{WHEEL}#sha256={SHA}' data-yanked><span>{WHEEL}</span></A><br/>
<a href="../../files/b/vllm-0.21.0.tar.gz#sha256={SHA}&amp;x=1">vllm-0.21.0.tar.gz</a>
</body></html>"""
PAGE_URL = "https://mirror.example/simple/vllm/"


def test_a_json_page_and_the_same_page_in_html_give_the_same_wheels() -> None:
    expected = (IndexFile(WHEEL, f"https://mirror.example/files/a/{WHEEL}", SHA, None, "0.21.0", 1, yanked=True),)
    as_json = wheels_on(
        parse_project_page(PAGE_URL, "application/vnd.pypi.simple.v1+json", json.dumps(JSON_PAGE)), PAGE_URL
    )
    as_html = wheels_on(parse_project_page(PAGE_URL, "text/html", HTML_PAGE), PAGE_URL)
    assert as_json == as_html == expected


@pytest.mark.parametrize(
    ("page", "what"),
    [
        ({**JSON_PAGE, "files": [1]}, "`files[0]`"),
        ({**JSON_PAGE, "files": {WHEEL: {}}}, "`files`"),
        ({**JSON_PAGE, "files": [{**JSON_FILE, "hashes": "sha256=00"}]}, "`files[0].hashes`"),
        ({**JSON_PAGE, "meta": {"api-version": "2.0"}}, "2.0"),
    ],
)
def test_a_json_page_of_the_wrong_shape_says_where_in_one_line(page: dict[str, object], what: str) -> None:
    with pytest.raises(PackageIndexError, match="is not a PEP 691 project page") as refused:
        parse_project_page(PAGE_URL, "application/vnd.pypi.simple.v1+json", json.dumps(page))
    assert what in str(refused.value) and "\n" not in str(refused.value)
    assert refused.value.exit_code == EXIT_TRANSPORT


def test_a_traversal_name_on_an_html_page_is_refused_by_the_reader() -> None:
    evil = "vllm-0.21.0-1/../../../../x-cp38-abi3-any.whl"
    page = parse_project_page(PAGE_URL, "text/html", f'<a href="x.whl#sha256={SHA}">{evil}</a>')
    with pytest.raises(UnsafeIndexError, match="is not a base name"):
        wheels_on(page, PAGE_URL)
