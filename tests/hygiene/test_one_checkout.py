"""One Checkout per command: patches/, lines.toml and train.toml are read by release/queue/ and release/model/ alone.

A command loads a `Checkout` (release/queue/snapshot.py) once, under its lock, and hands it to its stages; a
stage that called a loader itself would read the checkout a second time, maybe after a concurrent swap, and
disagree with the stages beside it. So the loaders below, and a Checkout built by hand instead of by
`Checkout.load`, are used only inside release/queue/ and release/model/ (the runtime, release/overlay/runtime/,
ships in the wheel without release/ and is not counted). A module outside them that must read the files itself
is named in EXCEPTIONS with why; a stale exception fails too, so the list stays the list of what is left.
"""

from __future__ import annotations

import ast

from helpers.sources import release_trees

OWNERS = ("release/queue/", "release/model/")
CLASSES = {"Queue", "Train", "Series", "Patch"}  # their `.load`, called or passed on as a loader
FUNCTIONS = {"read_lines", "load_lines"}  # called or passed on
BUILT = "Checkout"  # called: a Checkout built by hand

# (module, loader): why it reads the files itself. None is left: every command reads them through its Checkout.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def uses(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, loader) of each use of a loader in a module, through any `import ... as` name."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update({alias.asname or alias.name: alias.name for alias in node.names})
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "load" and isinstance(node.value, ast.Name):
            owner = names.get(node.value.id, node.value.id)
            if owner in CLASSES:
                found.append((node.lineno, f"{owner}.load"))
        elif isinstance(node, ast.Name) and names.get(node.id, node.id) in FUNCTIONS:
            found.append((node.lineno, names.get(node.id, node.id)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and names.get(node.func.id) == BUILT:
            found.append((node.lineno, f"{BUILT}("))
    return sorted(found)


def outside_the_owners() -> list[tuple[str, int, str]]:
    return [
        (name, line, loader)
        for name, tree in release_trees()
        if not name.startswith(OWNERS)
        for line, loader in uses(tree)
    ]


def test_only_queue_and_model_read_the_checkouts_files() -> None:
    found = [
        f"{name}:{line}: {loader}" for name, line, loader in outside_the_owners() if (name, loader) not in EXCEPTIONS
    ]
    assert found == [], (
        "read patches/, lines.toml and train.toml through the command's Checkout (release/queue/snapshot.py: "
        "Checkout.load once, under the lock, handed to each stage), or say why in EXCEPTIONS"
    )


def test_every_exception_is_still_needed() -> None:
    used = {(name, loader) for name, _line, loader in outside_the_owners()}
    stale = [f"{name}: {loader}" for name, loader in EXCEPTIONS if (name, loader) not in used]
    assert stale == [], "remove these from EXCEPTIONS: nothing there reads the files itself any more"


def test_a_loader_is_found_through_any_name() -> None:
    """The check sees a call, a loader passed on, an alias, and a Checkout built by hand; not a Checkout.load."""
    source = (
        "from release.model.lines import read_lines as lines_of\n"
        "from release.model.train import Train as T\n"
        "from release.queue.snapshot import Checkout\n"
        "a = lines_of(p)\n"
        "b = T.load(p, names)\n"
        "c = f(load=Patch.load)\n"
        "d = Checkout(layout, queue, None, None)\n"
        "e = Checkout.load(layout)\n"
        "def g(checkout: Checkout) -> None: ...\n"
    )
    assert uses(ast.parse(source)) == [(4, "read_lines"), (5, "Train.load"), (6, "Patch.load"), (7, "Checkout(")]
