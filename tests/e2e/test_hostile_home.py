"""The maintainer's machine is not ours: under a hostile HOME every command writes the same bytes.

One run of the real commands as processes (the patch queue two patches deep: `pq import`,
`pq export --check`, `pq carry` and `pq skip` of a downstream-only 0002; then `upstream-pr` with a
vLLM clone and the trees its proof patches by `git am` (its pytest runs, which git has no part in, are
test_upstream_pr.py's), `rebase`, `check`, `train remove`/`add`/`check`, `build`) under an empty HOME
and one under a hostile one: a
~/.gitconfig with the settings people really have (`diff.noprefix`, `format.signOff`,
`apply.whitespace=fix`, a histogram diff, copy detection, `core.autocrlf`, signing, a global
excludes and attributes file, a template directory) and hooks that all fail, git variables
in the environment (`GIT_CONFIG_PARAMETERS`, `GIT_DIR`, dates, identities), and the same
settings in the local configuration of the repositories we did not create: the maintainer's
checkout and the contributor's vLLM clone. Every output must have the same bytes.

Upstream input is the real release wheels (cached), as in test_rebase.py; the clone is made
from the real files of the pinned release, as in test_upstream_pr.py. The git that sets up
the checkout and the clone here runs apart from the code under test (its own isolation).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, copy_project, private_cache, run_release, tag_facts
from helpers.failure import failed
from helpers.fix import fix_patch
from helpers.synthetic import SHAPE_CHECK_PATCH, add_shape_check
from helpers.train import load_train
from release.core.errors import ToolMissingError
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.model.patch import Patch
from release.model.pin import Pin
from release.model.series import Series
from release.model.source import Source
from release.pristine.sources import fetch

pytestmark = pytest.mark.network  # the release wheels come from the package index once, then the cache

FROM, TO = tag_facts.rebase_from(), tag_facts.rebase_to()
FIX = fix_patch().name  # the queue's first bug fix (helpers/fix.py), whatever its name
CONTRIBUTOR = ("A Contributor", "contributor@example.com")
HOMES = ("empty", "hostile")
HOOKS = [
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit", "prepare-commit-msg",
    "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge", "post-rewrite",
    "reference-transaction", "pre-auto-gc", "post-index-change",
]  # fmt: skip
# What a maintainer's ~/.gitconfig and a contributor's clone may well hold; every value differs from git's default.
HOSTILE_CONFIG = {
    "user": {"name": "Hostile Home", "email": "hostile@example.invalid", "signingKey": "0xDEADBEEF"},
    "commit": {"gpgSign": "true"},
    "tag": {"gpgSign": "true"},
    "core": {
        "hooksPath": "{hooks}",
        "autocrlf": "true",
        "attributesFile": "{home}/attributes",
        "excludesFile": "{home}/ignore",
    },
    "init": {"templateDir": "{home}/template", "defaultBranch": "hostile"},
    "diff": {
        "noprefix": "true",
        "mnemonicPrefix": "true",
        "algorithm": "histogram",
        "renames": "copies",
        "context": "5",
        "external": "/bin/false",
    },
    "format": {
        "signOff": "true",
        "numbered": "true",
        "suffix": ".diff",
        "headers": '"X-Hostile: yes\\n"',
        "signature": "hostile",
    },
    "apply": {"whitespace": "fix"},
    "am": {"threeWay": "true", "messageId": "true", "keepCR": "true"},
    "merge": {"conflictStyle": "diff3"},
    "log": {"showSignature": "true"},
    "color": {"ui": "always"},
    "trailer": {"separators": '":#"'},
    "status": {"showUntrackedFiles": "no"},
    "safe": {"directory": "*"},
    'filter "hostile"': {"clean": "tr a-z A-Z", "smudge": "tr a-z A-Z"},
}
# A repository's own configuration cannot name safe directories, and the clone keeps the contributor as its user.
NOT_LOCAL = ("user", "init", "safe")


def gitconfig(home: Path, sections: dict[str, dict[str, str]]) -> str:
    hooks = home / "hooks"
    return "".join(
        f"[{section}]\n" + "".join(f"\t{key} = {value.format(home=home, hooks=hooks)}\n" for key, value in keys.items())
        for section, keys in sections.items()
    )


# Variables a shell, a git alias or a hook may leave behind: each would change what git does.
HOSTILE_ENV = {
    "GIT_CONFIG_PARAMETERS": "'diff.noprefix'='true' 'format.signoff'='true' 'core.hookspath'='{hooks}'",
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "diff.algorithm",
    "GIT_CONFIG_VALUE_0": "patience",
    "GIT_DIR": "{home}/no-such-repository",
    "GIT_WORK_TREE": "{home}",
    "GIT_INDEX_FILE": "{home}/index",
    "GIT_TEMPLATE_DIR": "{home}/template",
    "GIT_AUTHOR_NAME": "Hostile Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_AUTHOR_DATE": "2011-11-11T11:11:11+0000",
    "GIT_COMMITTER_DATE": "2011-11-11T11:11:11+0000",
    "GIT_DIFF_OPTS": "--unified=9",
    "GIT_EXTERNAL_DIFF": "/bin/false",
    "EMAIL": "hostile@example.invalid",
}
FIXED_DATE = "2000-01-01T00:00:00+0000"


def setup_git(repo: Path, *args: str) -> str:
    """git for the fixtures here, isolated by its own means (not by the code under test)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env |= {
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_DATE": FIXED_DATE,
        "GIT_COMMITTER_DATE": FIXED_DATE,
    }
    settings = {
        "core.hooksPath": os.devnull,
        "core.attributesFile": os.devnull,
        "core.excludesFile": os.devnull,
        "core.autocrlf": "false",
        "commit.gpgSign": "false",
        "user.name": "Test Maintainer",
        "user.email": "maintainer@example.com",
    }
    config = [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]
    proc = subprocess.run(
        ["git", *config, "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, f"git {args}: {proc.stderr}"
    return proc.stdout


def make_home(home: Path, hostile: bool) -> dict[str, str]:
    """HOME (empty, or hostile with failing hooks) and the environment a command runs with there."""
    home.mkdir()
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    if not hostile:
        return env
    hooks = home / "hooks"
    for directory in (hooks, home / "template" / "hooks"):
        directory.mkdir(parents=True)
        for name in HOOKS:
            (directory / name).write_text("#!/bin/sh\necho 'hostile hook ran' >&2\nexit 1\n")
            (directory / name).chmod(0o755)
    (home / "template" / "info").mkdir()
    (home / "template" / "info" / "exclude").write_text("*.py\n")
    (home / "ignore").write_text("*.py\n*.patch\n")
    (home / "attributes").write_text("*.py -diff filter=hostile\n*.patch text eol=crlf\n")
    (home / ".gitconfig").write_text(gitconfig(home, HOSTILE_CONFIG))
    return env | {key: value.format(home=home, hooks=hooks) for key, value in HOSTILE_ENV.items()}


def spoil_local_config(repo: Path, home: Path) -> None:
    """The same hostile settings in a repository's own .git/config (one we did not create)."""
    local = {section: keys for section, keys in HOSTILE_CONFIG.items() if section not in NOT_LOCAL}
    with (repo / ".git" / "config").open("a") as config:
        config.write(gitconfig(home, local))


def make_clone(path: Path, files: dict[str, bytes], tag: str) -> Path:
    """A vLLM clone at `tag` (the subtree of the real release), on main, with the contributor's identity."""
    path.mkdir()
    setup_git(path, "init", "--quiet", "--initial-branch=main")
    setup_git(path, "config", "user.name", CONTRIBUTOR[0])
    setup_git(path, "config", "user.email", CONTRIBUTOR[1])
    for name, data in files.items():
        (path / UPSTREAM_SUBTREE / name).parent.mkdir(parents=True, exist_ok=True)
        (path / UPSTREAM_SUBTREE / name).write_bytes(data)
    (path / "README.md").write_text("vLLM\n")
    setup_git(path, "add", "--all")
    setup_git(path, "commit", "--quiet", "-m", f"vLLM {tag}")
    setup_git(path, "tag", "-a", tag, "-m", tag)
    return path


def record(outputs: dict[str, bytes], step: str, result: subprocess.CompletedProcess[str], base: Path) -> None:
    """A command's exit status and words, with this run's directory written as <base>."""
    text = f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    text = re.sub(r"\b\d+\.\d+ s\b", "<seconds> s", text.replace(str(base), "<base>"))
    text = re.sub(r"(?m)^\S+\.whl: .*\]$", "<progress>", text)  # a download's progress bar: its rates and times
    outputs[f"{step}: exit and output"] = text.encode()


def files_under(outputs: dict[str, bytes], step: str, root: Path, top: Path) -> None:
    for path in sorted(top.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            outputs[f"{step}: {path.relative_to(root)}"] = path.read_bytes()


def queue_two_deep(outputs: dict[str, bytes], project: Path, env: dict[str, str], base: Path) -> None:
    """The patch queue with a downstream-only 0002 behind the fix: the work tree made and exported again
    (git am, git format-patch), the new patch carried onto the older lines or skipped where it cannot be."""
    add_shape_check(project)  # made by the test's own isolated git; every older line is silent about it
    record(outputs, "pq import", run_release(project, "pq", "import", env=env), base)
    record(outputs, "pq export --check", run_release(project, "pq", "export", "--check", env=env), base)
    carried = run_release(project, "pq", "carry", SHAPE_CHECK_PATCH, "--json", env=env)
    record(outputs, "pq carry", carried, base)
    for line in json.loads(carried.stdout)["silent"] if carried.returncode == 0 else []:
        why = "the test's shape check: this line's two-sided class differs"
        skipped = run_release(project, "pq", "skip", SHAPE_CHECK_PATCH, "--line", line, "--reason", why, env=env)
        record(outputs, f"pq skip {line}", skipped, base)
    record(outputs, "pq check", run_release(project, "check", env=env), base)
    files_under(outputs, "pq", project, project / "patches")
    files_under(outputs, "pq", project, project / "reports")


# The trees upstream-pr's proof runs its pytest on "with this PR" (release/upstream_pr/prove.py): each
# patched run of its plan, the mail applied by `git am --3way` over the PR's base. Printed as
# "TAG FILE SHA256 patched|released" for every file of the subtree.
PROOF_TREES = """
import hashlib, sys, tempfile
from pathlib import Path
from release.core.layout import UPSTREAM_SUBTREE, Layout
from release.queue.snapshot import Checkout
from release.upstream_pr.plan import pristine_of_pin, proof_plan
from release.upstream_pr.prove import patched_tree, source_tree

layout, mail = Layout(Path(sys.argv[1])), Path(sys.argv[2])
checkout = Checkout.load(layout)
base = pristine_of_pin(checkout)
for run in proof_plan(checkout, checkout.patch(layout.patches / mail.name)):
    if run.patched:
        released = source_tree(run.tag) / UPSTREAM_SUBTREE
        with tempfile.TemporaryDirectory() as work:
            subtree = patched_tree(source_tree(run.tag), base, mail, Path(work), run.tag) / UPSTREAM_SUBTREE
            for path in sorted(p for p in subtree.rglob("*") if p.is_file()):
                name = path.relative_to(subtree).as_posix()
                same = (released / name).is_file() and (released / name).read_bytes() == path.read_bytes()
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                print(run.tag, name, digest, "released" if same else "patched")
"""


def proof_trees(project: Path, mail: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The proof's patched trees, made by release/upstream_pr/prove.py in a process under the HOME's `env`."""
    return subprocess.run(
        [sys.executable, "-c", PROOF_TREES, str(project), str(mail)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def run_everything(base: Path, hostile: bool, pristine_from: dict[str, bytes]) -> dict[str, bytes]:
    """Every command of the release flow under one HOME; each output by name."""
    env = make_home(base / "home", hostile) | private_cache(base)
    outputs: dict[str, bytes] = {}
    project = copy_project(base)
    if Pin.load(Layout(project).upstream_toml).tag != FROM:  # start where the rebase scenario starts
        moved = run_release(project, "rebase", FROM, "--from", "pypi", "--allow-older", env=env)
        record(outputs, "setup rebase", moved, base)
    queue_two_deep(outputs, project, env, base)
    shutil.copy(REPO / ".gitignore", project / ".gitignore")  # .work/ and reports/ are the tool's, never committed
    setup_git(project, "init", "--quiet", "--initial-branch=main")
    setup_git(project, "add", "--all")
    setup_git(project, "commit", "--quiet", "-m", "the maintainer's checkout")
    if hostile:
        spoil_local_config(project, base / "home")

    clone = make_clone(base / "vllm", pristine_from, FROM)
    if hostile:
        spoil_local_config(clone, base / "home")
    pr = base / "upstream-pr"
    # The proof's pytest runs (five vLLM imports) are test_upstream_pr.py's; what git does in them is
    # the trees `git am` patches, made below under this HOME.
    result = run_release(project, "upstream-pr", FIX, "--vllm", str(clone), "--out", str(pr),
                         "--reports", str(base / "no-reports"), "--skip-test-run", env=env)  # fmt: skip
    # Its commit id is printed: it differs by the committer time alone, compared below without it.
    result.stdout = re.sub(r" at [0-9a-f]{12} in ", " at <commit> in ", result.stdout)
    record(outputs, "upstream-pr", result, base)
    files_under(outputs, "upstream-pr", base, pr)
    record(outputs, "upstream-pr proof trees", proof_trees(project, pr / FIX, env), base)
    commit = setup_git(clone, "cat-file", "commit", "HEAD")
    # The contributor's commit is made now: its committer time is the one thing that may differ.
    commit = re.sub(r"(?m)^(committer .*>) \d+ ", r"\1 <now> ", commit)
    outputs["upstream-pr: the commit in the clone"] = commit.encode()
    outputs["upstream-pr: the clone's branch"] = setup_git(clone, "symbolic-ref", "HEAD").encode()

    report = base / "rebase-report"
    rebased = run_release(project, "rebase", TO, "--from", "pypi", "--report", str(report), env=env)
    record(outputs, "rebase", rebased, base)
    files_under(outputs, "rebase", project, project / "patches")
    files_under(outputs, "rebase", project, project / "vendor")
    files_under(outputs, "rebase", base, report)

    record(outputs, "check", run_release(project, "check", env=env), base)

    train = load_train(Layout(project))
    head = Pin.load(Layout(project).upstream_toml).tag
    other = next(tag for tag in reversed(train.tags) if tag != head)
    # Re-recorded first: the queue now holds 0002, which the entry of `other` does not list yet.
    record(outputs, "train re-record", run_release(project, "train", "add", other, env=env), base)
    outputs["train: train.toml before"] = Layout(project).train.read_bytes()
    record(outputs, "train remove", run_release(project, "train", "remove", other, env=env), base)
    record(outputs, "train add", run_release(project, "train", "add", other, env=env), base)
    outputs["train: train.toml after remove and add"] = Layout(project).train.read_bytes()
    record(outputs, "train check", run_release(project, "train", "check", other, head, env=env), base)

    # The maintainer commits what rebase wrote, then builds from a clean checkout.
    setup_git(project, "add", "--all", "--", "vendor", "patches")
    setup_git(project, "commit", "--quiet", "-m", f"rebase onto {TO}")
    dist = base / "dist"
    record(outputs, "build", run_release(project, "build", "--out", str(dist), env=env), base)
    for wheel in sorted(dist.glob("*.whl")):
        outputs[f"build: {wheel.name} sha256"] = hashlib.sha256(wheel.read_bytes()).hexdigest().encode()
    return outputs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, bytes]]:
    """One run of everything per HOME (the costly part, done once for the module)."""
    pristine_from = fetch(FROM, Source.parse("pypi")).files
    return {home: run_everything(tmp_path_factory.mktemp(home), home == "hostile", pristine_from) for home in HOMES}


def test_the_empty_home_run_did_the_work(runs: dict[str, dict[str, bytes]]) -> None:
    """What the comparison rests on: under an empty HOME every step succeeded and wrote real outputs."""
    empty = runs["empty"]
    pq_steps = [key.split(":")[0] for key in empty if key.startswith("pq ") and key.endswith(": exit and output")]
    assert {"pq import", "pq export --check", "pq carry", "pq check"} <= set(pq_steps)
    steps = (
        "upstream-pr",
        "upstream-pr proof trees",
        "rebase",
        "check",
        "train re-record",
        "train remove",
        "train add",
        "train check",
        "build",
    )
    for step in (*pq_steps, *steps):
        assert empty[f"{step}: exit and output"].startswith(b"exit 0\n"), empty[f"{step}: exit and output"].decode()
    patch = empty[f"rebase: patches/{FIX}"].decode()
    assert f"\ndiff --git a/{UPSTREAM_SUBTREE}/" in patch and "Signed-off-by" not in patch
    # Two patches deep, the second downstream-only, and every older line answered for it (a variant or a skip).
    series = Series(tuple(empty["rebase: patches/series"].decode().splitlines()))
    assert series.names == [FIX, SHAPE_CHECK_PATCH]
    assert "\nDownstream: " in empty[f"rebase: patches/{SHAPE_CHECK_PATCH}"].decode()
    carry = json.loads(empty["pq: reports/pq-carry/carry-report.json"])
    assert carry["lines"] and all(c["result"] in ("written", "needs-variant") for c in carry["lines"]), carry
    assert sorted(step.removeprefix("pq skip ") for step in pq_steps if step.startswith("pq skip ")) == sorted(
        carry["silent"]
    )
    carried_from = b"Carried-From: " + SHAPE_CHECK_PATCH.encode()
    variants = [empty[k] for k in empty if k.startswith("pq: patches/lines/") and carried_from in empty[k]]
    assert len(variants) == len([c for c in carry["lines"] if c["result"] == "written"])
    assert all(b"Signed-off-by" not in v and b"\ndiff --git a/" in v for v in variants)
    assert b'"result": "done"' in empty["rebase: rebase-report/rebase-report.json"]  # FROM -> TO refreshed the patch
    assert empty["train: train.toml after remove and add"] == empty["train: train.toml before"]
    assert [key for key in empty if key.startswith("build: ") and key.endswith(".whl sha256")]
    # The proof's trees: on each release of its plan, the PR's files patched and every other file as released.
    trees = empty["upstream-pr proof trees: exit and output"].decode().split("--- stdout\n")[1].split("\n--- stderr")[0]
    patched: dict[str, list[str]] = {}
    for tag, name, _digest, state in (line.split() for line in trees.splitlines()):
        patched.setdefault(tag, [])
        if state == "patched":
            patched[tag].append(name)
    fixes = Patch.load(REPO / "patches" / FIX).files
    fixed = sorted(name.removeprefix(f"{UPSTREAM_SUBTREE}/") for name in fixes)
    assert patched and all(names == fixed for names in patched.values()), (patched, fixed)
    commit = empty["upstream-pr: the commit in the clone"].decode()
    assert f"committer {CONTRIBUTOR[0]} <{CONTRIBUTOR[1]}> <now> " in commit
    assert commit.rstrip().endswith(f"Signed-off-by: {CONTRIBUTOR[0]} <{CONTRIBUTOR[1]}>")
    assert "Message-ID" not in commit and "Message-Id" not in commit


def text(data: bytes) -> str:
    return data.decode("utf-8", "replace")[:1500]


@pytest.mark.parametrize("step", ["pq", "upstream-pr", "rebase", "check", "train", "build"])
def test_a_hostile_home_changes_no_byte(runs: dict[str, dict[str, bytes]], step: str) -> None:
    empty, hostile = ({k: v for k, v in run.items() if k.split(":")[0].startswith(step)} for run in runs.values())
    assert empty, f"no output of {step}"
    assert sorted(hostile) == sorted(empty), f"{step}: other outputs under the hostile HOME"
    differ = [name for name in empty if hostile[name] != empty[name]]
    shown = (f"{name}:\n{text(empty[name])}\n--- hostile:\n{text(hostile[name])}" for name in differ)
    assert not differ, "\n\n".join(shown)


def test_a_git_too_old_to_be_isolated_is_refused(project: Path, tmp_path: Path) -> None:
    """git before 2.32 ignores GIT_CONFIG_GLOBAL, so it would read ~/.gitconfig again: refused, one line.

    The old git is a test double (a script that answers `git version` as git 2.25 does): no old
    git is installed here.
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text("#!/bin/sh\necho 'git version 2.25.1'\n")
    (bin_dir / "git").chmod(0o755)
    result = run_release(project, "check", env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 1, result.stderr
    error = failed(result)
    assert error.reference == ToolMissingError.reference and error.hint and "Traceback" not in result.stderr
    assert error.message.startswith("git 2.32 or newer is needed (git version 2.25.1)"), error
