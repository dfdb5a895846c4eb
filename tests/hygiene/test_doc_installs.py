"""Every install of our wheel that the docs show is one that tests/overlay/test_user_install.py runs
in its hostile shell (a pip configuration and uv settings that offer impostors of `vllm-fused-moe`).

An install by name (`pip install --index-url URL/simple vllm-fused-moe`, `"vllm-fused-moe==X"`)
takes `99.0` or `X+fm.99` from the `extra-index-url` or `find-links` of the user's configuration,
silently, with exit 0: only the requirements-file form (our wheel's sha256 pinned) is safe, and only
the blocks marked `<!-- user-install: pip|uv -->` in docs/overlay.md are run that way. So every
command that installs `vllm-fused-moe` or one of our requirements files, in a fenced block or in
inline code of README.md or docs/*.md, must have the shape of a line of those blocks (the same
options; the interpreter, the index's address and the versions may differ).
"""

from __future__ import annotations

from helpers import REPO
from helpers.doc_commands import (
    doc_commands,
    docs,
    inline_spans,
    install_shape,
    installs_our_wheel,
    split_commands,
    user_install_blocks,
)

OVERLAY_DOC = REPO / "docs" / "overlay.md"


def shapes_run_hostile() -> set[tuple[str, ...]]:
    blocks = user_install_blocks(OVERLAY_DOC.read_text(encoding="utf-8"))
    assert set(blocks) == {"pip", "uv"}, f"docs/overlay.md: user-install blocks {sorted(blocks)}"
    return {install_shape(words) for lines in blocks.values() for line in lines for words in split_commands(line)}


def shown_installs() -> list[tuple[str, tuple[str, ...]]]:
    """(where, words) of every install of our wheel in a fenced block or inline code of the docs."""
    found = []
    for doc in docs(REPO):
        name = doc.relative_to(REPO).as_posix()
        for command in doc_commands(REPO, doc):
            found.append((command.where, command.words))
        for line, code in inline_spans(doc.read_text(encoding="utf-8")):
            try:
                commands = split_commands(code)
            except ValueError:
                continue
            found += [(f"{name}:{line}: `{code}`", tuple(words)) for words in commands]
    return [(where, words) for where, words in found if installs_our_wheel(words)]


def test_the_shapes_make_examples_and_tested_lines_equal() -> None:
    example = (
        "python -m pip install --no-index --find-links https://INDEX/simple/vllm-fused-moe/"
        " -r https://INDEX/requirements/vllm-X.txt"
    )
    tested = (
        "/venv/bin/python -m pip install --no-index --find-links https://fused-moe.example.com/simple/vllm-fused-moe/"
        " -r https://fused-moe.example.com/requirements/vllm-0.20.0.txt"
    )
    by_name = "pip install --index-url https://INDEX/simple vllm-fused-moe"
    assert install_shape(example.split()) == install_shape(tested.split())
    assert installs_our_wheel(by_name.split()) and install_shape(by_name.split()) != install_shape(example.split())
    assert not installs_our_wheel(["python", "-m", "pip", "install", "vllm==0.20.0"])


def test_every_install_of_our_wheel_the_docs_show_is_one_the_hostile_shell_runs() -> None:
    shown = shown_installs()
    assert any(where.startswith("README.md:") for where, _ in shown), "the README shows no install of the fix"
    tested = shapes_run_hostile()
    untested = [where for where, words in shown if install_shape(words) not in tested]
    assert not untested, (
        "installs of vllm-fused-moe that tests/overlay/test_user_install.py does not run in its hostile shell "
        "(use the requirements-file form of docs/overlay.md, 'Install'):\n" + "\n".join(untested)
    )


def test_the_readmes_first_screen_warns_against_an_install_by_name() -> None:
    """A user who reads one screen of the README must learn that an install by name can take an impostor
    (docs/overlay.md, "Pick the right wheel"): the warning sits in its first 25 lines, beside the install."""
    first_screen = (REPO / "README.md").read_text(encoding="utf-8").splitlines()[:25]
    warning = [line for line in first_screen if "by name" in line]
    assert warning, "README.md's first screen does not warn against installing vllm-fused-moe by name"
    text = " ".join(first_screen[first_screen.index(warning[0]) :])
    assert "docs/overlay.md#pick-the-right-wheel" in text and "impostor" in text, text
    anchors = (REPO / "docs" / "overlay.md").read_text(encoding="utf-8")
    assert "\n## Pick the right wheel\n" in anchors


def test_the_readme_says_how_to_give_the_doctor_its_index() -> None:
    """Issue 38, 2: the doctor's fix is a command that runs only where it knows our index; the README,
    whose install the doctor repeats, says how to pass it (the option and the variable it reads, not the
    tooling's VLLM_FUSED_MOE_INDEX_URL: tests/doctor/test_fixes.py holds the doctor to that name)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "vllm-fused-moe doctor --index-url https://INDEX" in readme
    assert "`VLLM_FUSED_MOE_OVERLAY_INDEX_URL`" in readme
