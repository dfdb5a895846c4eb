"""The one owner of each way in, as docs/architecture.md names them, holds in every module of release/: TOML and JSON
are parsed by release/core/parse.py, a wheel is opened through release/core/files.py's regular bounded reader,
and HTTP goes through release/pristine/transport.py. The few modules that may not are named here with why (the
same words as docs/architecture.md), so a new bypass fails this test. The runtime (release/overlay/runtime/)
ships in the wheel without release/ and is not counted."""

from __future__ import annotations

import ast

from helpers import REPO
from helpers.sources import release_trees

PARSERS = {("json", "loads"), ("json", "load"), ("tomllib", "loads"), ("tomllib", "load")}
# Module: why it parses JSON itself.
OWN_PARSER = {
    "release/core/parse.py": "the one parser",
    "release/overlay/backend_worker.py": "run by path under the build backend's interpreter, it imports the "
    "standard library alone; its parent parses each answer with release/core/parse.py",
    "release/evidence/child/vllm_fused_moe_evidence_server.py": "the fork server, run by path under the proving "
    "interpreter, imports the standard library alone (never the tool); its parent parses its answers with "
    "release/core/parse.py",
}
# Module: why it opens a zip other than on release/core/files.py's open_regular handle.
OWN_ZIP = {
    "release/pristine/wheel.py": "the reader of vLLM's release wheels: each member against the wheel's RECORD, "
    "on the file it hashed or the lazy reader's ranges",
    "release/overlay/wheel.py": "the one reader of our wheels: the ZipFile is over the handle read_wheel opened "
    "with open_wheel (open_regular), passed in so that one open also hashes the file",
}
# Module: why it speaks HTTP with urllib.request.
OWN_HTTP = {
    "release/gsm8k/client.py": "the local `vllm serve` the smoke started, on 127.0.0.1, with its own deadline",
    "release/gsm8k/server.py": "the health check of that local server",
}


def called(node: ast.AST) -> tuple[str, str] | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
        return node.func.value.id, node.func.attr
    return None


def test_toml_and_json_are_parsed_by_the_one_parser() -> None:
    found = [
        f"{name}:{node.lineno}"
        for name, tree in release_trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and called(node) in PARSERS and name not in OWN_PARSER
    ]
    assert found == [], "parse with release.core.parse (parse_json, parse_toml, load_toml), or say why in OWN_PARSER"


def opened_handles(tree: ast.Module) -> set[int]:
    """The line of each zipfile.ZipFile(handle) whose handle an earlier item of its `with` opened with
    open_regular (or open_wheel, which is open_regular): a regular file, bounded, never a device or a pipe."""
    ok = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.With):
            continue
        handles = set()
        for item in node.items:
            call = item.context_expr
            if not isinstance(call, ast.Call):
                continue
            opener = isinstance(call.func, ast.Name) and call.func.id in ("open_regular", "open_wheel")
            if opener and isinstance(item.optional_vars, ast.Name):
                handles.add(item.optional_vars.id)
            first = call.args[0] if call.args else None
            if called(call) == ("zipfile", "ZipFile") and isinstance(first, ast.Name) and first.id in handles:
                ok.add(call.lineno)
    return ok


def test_a_wheel_is_opened_through_the_one_reader() -> None:
    found = []
    for name, tree in release_trees():
        if name in OWN_ZIP:
            continue
        ok = opened_handles(tree)
        found += [
            f"{name}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and called(node) == ("zipfile", "ZipFile") and node.lineno not in ok
        ]
    assert found == [], "open it with open_regular (release/core/files.py) first, or say why in OWN_ZIP"


def test_http_goes_through_the_transport() -> None:
    found = []
    for name, tree in release_trees():
        for node in ast.walk(tree):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n in ("urllib.request", "http.client", "requests", "urllib3") for n in names):
                found.append(name)
    allowed = {"release/pristine/transport.py", *OWN_HTTP}
    assert sorted(set(found) - allowed) == [], "read HTTP with release/pristine/transport.py, or say why in OWN_HTTP"
    assert set(OWN_HTTP) <= set(found)  # an entry nobody needs any more goes


def test_the_exceptions_are_the_ones_the_architecture_page_names() -> None:
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    for name in (*OWN_PARSER, *OWN_ZIP, *OWN_HTTP):
        assert name.removeprefix("release/") in page or name in page, name
