"""The `vllm serve` command line that `nox -s gsm8k` builds is accepted by every train tag's vLLM.

For each tag of patches/train.toml, the release wheel's Python files are unpacked (cached
beside the wheels) and a separate interpreter, with them first on its path, builds vLLM's
own `vllm serve` parser and parses our arguments (serve_flags_probe.py); no server starts.
A probe's reports are cached beside the unpacked files, keyed by the wheel's sha256, the argument
lists, the probe's own code and the interpreter with its installed packages: a release's parser
never changes, and importing each tag's vLLM is nearly all of this file's cost (about 7 s of CPU
a tag).
The argument lists come from the real `release gsm8k` option parser with its defaults, for
each backend. The values the parser's --all2all-backend accepts are the tag's range of its line in
patches/lines.toml ([[line.serve]] `all2all_backends`), which the doctor refuses others with.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from helpers import tag_facts
from release.core.layout import Layout, write_files
from release.core.versions import version_of_tag
from release.gsm8k import cli
from release.gsm8k.server import BACKENDS
from release.gsm8k.smoke import serve_argv
from release.model.lines import load_lines, read_lines
from release.pristine.wheel import cache_dir, lookup, pypi_content
from release.scan.serve import read_serve

PROBE = Path(__file__).with_name("serve_flags_probe.py")
MARKER = "SERVE-FLAGS "
MODEL = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"  # the upstream report's model; never loaded
PORT = 8123
UNKNOWN_BACKEND = "flashinfer_nvlink_three_sided"

# slow: with an empty cache, every train tag's vLLM is imported once (the reports are cached after).
pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.timeout(300)]


def _python_member(name: str) -> bool:
    # The compiled extensions are CUDA builds that cannot load here anyway; the parser is Python.
    # RECORD itself has no hash in RECORD: the reader verifies every other member against it.
    return name.endswith(".py") or (".dist-info/" in name and not name.endswith("/RECORD"))


def unpacked_release(tag: str) -> tuple[Path, str]:
    """The Python files and METADATA of `tag`'s release wheel, unpacked once into the cache, and the wheel's sha256.

    Read with the tooling's lazy reader (range requests for those members, each checked against
    the wheel's RECORD): a few MB of Python out of a 240-470 MB wheel, for every train tag.
    """
    entry = lookup(version_of_tag(tag))  # the index's name and sha256 of the wheel: no member is read
    target = cache_dir().parent / "vllm-py" / entry.filename.removesuffix(".whl")
    if (target / ".complete").is_file():
        return target, entry.sha256
    content = pypi_content(version_of_tag(tag), _python_member)
    assert content.wheel == entry.filename, (content.wheel, entry.filename)
    staging = target.with_name(target.name + f".tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    write_files(staging, content.files)
    (staging / ".complete").write_text(content.wheel)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target, entry.sha256


def _environment(release: Path) -> list[str]:
    """This interpreter and the installed version of each distribution the release requires: the probe
    imports the release's own files and everything else (torch, transformers, pydantic, ...) from here."""
    metadata = next(release.glob("*.dist-info/METADATA")).read_text(encoding="utf-8")
    names = {
        canonicalize_name(Requirement(line.partition(":")[2]).name)
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:")
    }
    found = []
    for name in sorted(names):
        try:
            found.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} absent")
    return [sys.version, *found]


def probe_key(release: Path, wheel_sha256: str, argvs: list[list[str]]) -> str:
    """What a probe's reports depend on: the release (by the wheel's sha256, and where it is unpacked),
    the argument lists, the probe's code and the environment it runs in."""
    facts = [wheel_sha256, str(release), argvs, PROBE.read_text(encoding="utf-8"), _environment(release)]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()


def cached_probe(release: Path, wheel_sha256: str, argvs: list[list[str]]) -> list[dict[str, object]]:
    """probe(), or the reports a probe with the same key wrote beside the unpacked release."""
    cached = release.parent / f"{release.name}.serve-flags" / f"{probe_key(release, wheel_sha256, argvs)}.json"
    if cached.is_file():
        return list(json.loads(cached.read_text(encoding="utf-8")))
    reports = probe(release, argvs)  # asserts that the probe succeeded: only a complete answer is kept
    cached.parent.mkdir(exist_ok=True)
    beside = cached.with_name(f"{cached.name}.tmp-{os.getpid()}")
    beside.write_text(json.dumps(reports), encoding="utf-8")
    beside.replace(cached)
    return reports


def gsm8k_serve_argv(backend: str, tmp_path: Path) -> list[str]:
    """What `nox -s gsm8k -- --model MODEL --backend BACKEND` would start, all other options at their defaults."""
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    args = parser.parse_args(["--model", MODEL, "--backend", backend])
    return serve_argv(cli.config_from_args(args, tmp_path), "vllm", PORT)


def probe(release: Path, argvs: list[list[str]]) -> list[dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env.update(PYTHONPATH=str(release), VLLM_LOGGING_LEVEL="ERROR")
    done = subprocess.run(
        [sys.executable, str(PROBE), json.dumps(argvs)], capture_output=True, text=True, env=env, timeout=240
    )
    reports = [json.loads(line[len(MARKER) :]) for line in done.stdout.splitlines() if line.startswith(MARKER)]
    assert done.returncode == 0 and len(reports) == len(argvs), done.stdout[-2000:] + done.stderr[-4000:]
    return reports


LINES = {line.name: line for line in load_lines(Layout.default().lines)}
SERVE = read_serve(Layout.default().lines, read_lines(Layout.default().lines))
TAGS = [e.tag for e in tag_facts.train().entries]


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    return {backend: gsm8k_serve_argv(backend, tmp_path_factory.mktemp("gsm8k")) for backend in BACKENDS}


@pytest.fixture(scope="module")
def parsed(ours: dict[str, list[str]]) -> dict[str, tuple[Path, list[dict[str, object]]] | BaseException]:
    """Every tag's parser on our argument lists, two tags at a time: each probe is a process of its own
    that spends its time importing that release's vLLM, and a CI machine has two cores."""
    unknown = [UNKNOWN_BACKEND if a in BACKENDS else a for a in ours[BACKENDS[0]]]
    argvs = [argv[1:] for argv in ours.values()] + [unknown[1:]]

    def one(tag: str) -> tuple[Path, list[dict[str, object]]] | BaseException:
        try:
            release, wheel_sha256 = unpacked_release(tag)
            return release, cached_probe(release, wheel_sha256, argvs)
        except BaseException as failure:  # reported by that tag's test, not by every test
            return failure

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(TAGS, pool.map(one, TAGS), strict=True))


@pytest.mark.timeout(900)  # the first test waits for every tag's probe
@pytest.mark.parametrize("tag", TAGS)
def test_gsm8k_serve_arguments_are_accepted_by_the_tags_vllm(
    tag: str, ours: dict[str, list[str]], parsed: dict[str, tuple[Path, list[dict[str, object]]] | BaseException]
) -> None:
    """Every backend the tag's line has (patches/lines.toml) is accepted; every other one of ours refused."""
    entry = tag_facts.train().get(tag)
    assert entry is not None
    has = LINES[entry.line].backends
    assert has and set(has) <= set(BACKENDS), (entry.line, has)
    for argv in ours.values():
        assert argv[:3] == ["vllm", "serve", MODEL]
    result = parsed[tag]
    if isinstance(result, BaseException):
        raise result
    release, reports = result

    span = SERVE[entry.line].range_for(version_of_tag(tag))
    assert span is not None, f"patches/lines.toml: no [[line.serve]] of line {entry.line} holds {tag}"
    for report in reports:
        # The tag's own code parsed it, not the vLLM installed in this environment.
        assert report["vllm_version"] == version_of_tag(tag)
        assert str(report["vllm_file"]).startswith(str(release) + os.sep)
        # Exactly the values the data says this release accepts (and the doctor refuses the others).
        # 0.11.1-0.13.0 also list None, the optional field's unset value (not a backend).
        listed = report["all2all_choices"]
        choices = [c for c in listed if c != "None"] if isinstance(listed, list) else []
        assert sorted(choices) == sorted(span.all2all_backends), (tag, report["all2all_choices"])
    for backend, report in zip(ours, reports, strict=False):
        if backend not in has:
            assert report["accepted"] is False and report["exit_code"] == 2, f"vLLM {tag} has {backend}: {report}"
            continue
        assert report["accepted"] is True, f"vLLM {tag} refuses {ours[backend]}: {report}"
        args = report["args"]
        assert isinstance(args, dict)
        assert args["model_tag"] == MODEL and args["port"] == PORT
        assert args["all2all_backend"] == backend
        argv = ours[backend]
        assert args["tensor_parallel_size"] == int(argv[argv.index("--tensor-parallel-size") + 1])
        assert args["data_parallel_size"] == int(argv[argv.index("--data-parallel-size") + 1])
        assert args["enable_expert_parallel"] is True
    # The same parser refuses a backend the release does not have: acceptance above means something.
    assert reports[-1]["accepted"] is False and reports[-1]["exit_code"] == 2
