"""`publish DIST DIR --to URL` into a real index server, the documented install from it, and the signed evidence.

A real pypiserver (the `index-server` dependency group) runs on 127.0.0.1, once for the module, with
`--disable-fallback` (an unknown name is a 404, never a redirect to PyPI) and an htpasswd that guards
uploads. The head's train wheel (built once per run, helpers.build.train_wheels) is published into it
by the CLI with an ed25519 key; its evidence comes from the evidence cache where another test (or an
earlier run) proved it. DIR is served by `python -m http.server`, as docs/overlay.md serves it.
Then docs/overlay.md's `server-install` blocks run as written (our server and DIR in place of the
examples), with pip and with uv, in one venv that holds the head's vLLM release wheel (the same shortcut
and test double as tests/overlay/test_user_install.py: its first line, vLLM's own install, is not run),
and the doctor (installed, and `python -m release doctor`) verifies the signed evidence with the key
pinned. Refused: a changed envelope, a foreign key, a wheel swapped on the server (by pip's hash check and
by the next publish), an upload with a wrong password (which is never printed).
"""

from __future__ import annotations

import base64
import contextlib
import ensurepip
import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from passlib.apache import HtpasswdFile  # type: ignore[import-untyped]  # passlib ships no stubs; types-passlib is not pinned here

from helpers import REPO, tag_facts
from helpers.build import train_wheels
from helpers.doc_commands import user_install_blocks
from helpers.doctor import doctor_module, validate
from helpers.freshvenv import install_no_deps, lend_test_env, requirements_met, uv_binary
from release.core.errors import UploadError
from release.core.hashing import file_sha256
from release.overlay import attest
from release.overlay.upload import ServerTarget, twine_settings, upload
from release.pristine.wheel import pypi_wheel

pytestmark = [pytest.mark.slow, pytest.mark.network]

DOC = REPO / "docs" / "overlay.md"
DOC_SERVER, DOC_SITE, DOC_VLLM, DOC_KEY = (
    "https://pypi.example.com",
    "https://fused-moe.example.com",
    "0.20.0",
    "ed25519:HEX",
)
USER, PASSWORD = "maintainer", secrets.token_urlsafe(18)
START_S = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Server:
    url: str
    packages: Path
    started_s: float  # how long pypiserver took to answer /health


@contextlib.contextmanager
def pypiserver(root: Path) -> Iterator[Server]:
    packages, htpasswd = root / "packages", root / "htpasswd"
    packages.mkdir(parents=True)
    passwords = HtpasswdFile(str(htpasswd), new=True)
    passwords.set_password(USER, PASSWORD)
    passwords.save()
    port = free_port()
    # pypiserver's bundled bottle holds every multipart part under MEMFILE_MAX (100 KiB) in memory and refuses an
    # upload whose in-memory parts pass that sum ("MultipartError: Memory limit reached", a 400): a wheel just under
    # 100 KiB plus twine's metadata fields does (ours are 78-102 kB). The server is started with the limit raised,
    # as docs/overlay.md tells operators of pypiserver to; a wheel above 100 KiB goes to a temporary file instead.
    launcher = (
        "import runpy, sys; import pypiserver.bottle as b; b.BaseRequest.MEMFILE_MAX = 1 << 24; "
        "sys.argv = ['pypiserver', *sys.argv[1:]]; runpy.run_module('pypiserver', run_name='__main__')"
    )
    argv = [sys.executable, "-c", launcher, "run", "-p", str(port), "-i", "127.0.0.1", "--disable-fallback",
            "-a", "update", "-P", str(htpasswd), "--hash-algo", "sha256", str(packages)]  # fmt: skip
    start = time.monotonic()
    with (root / "server.log").open("wb") as log:
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                assert server.poll() is None, (root / "server.log").read_text()
                assert time.monotonic() - start < START_S, "pypiserver did not answer /health"
                time.sleep(0.1)
        yield Server(url, packages, time.monotonic() - start)
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextlib.contextmanager
def served(directory: Path) -> Iterator[str]:
    """`python -m http.server` over DIR on 127.0.0.1, as docs/overlay.md serves it."""
    port = free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(directory)]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2):
                break
            time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def publish_env() -> dict[str, str]:
    # twine's own credential lookup; keyring answers nothing (no backend on a CI runner, and none asked here).
    return {**os.environ, "TWINE_USERNAME": USER, "TWINE_PASSWORD": PASSWORD,
            "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}  # fmt: skip


def release_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # The evidence of a wheel the cache does not hold yet runs its tests: minutes, not run_release's 300 s.
    return subprocess.run([sys.executable, "-m", "release", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=1500, env=env or publish_env())  # fmt: skip


@dataclass(frozen=True)
class Published:
    server: Server
    wheel: Path
    vllm: str
    site: Path
    key: Path
    public: str  # ed25519:HEX, what the operator pins
    fingerprint: str
    first: subprocess.CompletedProcess[str]
    again: subprocess.CompletedProcess[str]
    site_after_first: dict[str, bytes]


def tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Published]:
    head = tag_facts.head().tag
    wheel = train_wheels(tmp_path_factory)[head]
    root = tmp_path_factory.mktemp("index-server")
    key = root / "key.pem"
    made = release_cli("signing-key", "--generate", str(key))
    assert made.returncode == 0, made.stderr
    public = re.search(r"^public key +(ed25519:[0-9a-f]{64})$", made.stdout, re.MULTILINE)
    fingerprint = re.search(r"^fingerprint +([0-9a-f]{64})$", made.stdout, re.MULTILINE)
    assert public and fingerprint, made.stdout
    site = root / "site"
    with pypiserver(root / "server") as server:
        args = ("publish", "--allow-dirty", str(wheel), str(site), "--to", server.url, "--signing-key", str(key))
        first = release_cli(*args)
        after_first = tree(site) if site.is_dir() else {}
        again = release_cli(*args)
        yield Published(server, wheel, head.removeprefix("v"), site, key, public[1], fingerprint[1], first, again,
                        after_first)  # fmt: skip


def test_publish_uploads_the_wheel_and_writes_requirements_and_signed_evidence(published: Published) -> None:
    first, wheel, site = published.first, published.wheel, published.site
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"uploaded {wheel.name}" in first.stdout and f"signed evidence/{wheel.name}.intoto.jsonl" in first.stdout
    assert PASSWORD not in first.stdout + first.stderr
    sha256 = file_sha256(wheel)
    assert file_sha256(published.server.packages / wheel.name) == sha256  # the server holds our very bytes
    pinned = (site / "requirements" / f"vllm-{published.vllm}.txt").read_text()
    assert f"--hash=sha256:{sha256}" in pinned
    evidence_bytes = (site / "evidence" / f"{wheel.name}.json").read_bytes()
    evidence = json.loads(evidence_bytes)
    statement = attest.payload_of((site / "evidence" / f"{wheel.name}.intoto.jsonl").read_bytes())
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://in-toto.io/attestation/test-result/v0.1"
    assert statement["subject"] == [{"name": wheel.name, "digest": {"sha256": sha256}}]
    predicate = statement["predicate"]
    digests = {c["name"]: c["digest"] for c in predicate["configuration"]}
    assert digests[evidence["vllm"]["wheel"]] == {"sha256": evidence["vllm"]["sha256"]}
    for bug in evidence["bugs"]:
        assert digests[bug["test"]] == {"sha256": bug["test_sha256"]}
    assert digests["vllm-fused-moe-tooling"]["gitCommit"] == evidence["tool"]["commit"]
    assert digests[f"evidence/{wheel.name}.json"] == {"sha256": file_sha256(site / "evidence" / f"{wheel.name}.json")}
    assert predicate["result"] == "PASSED" and predicate["passedTests"] and len(evidence_bytes) > 0
    # A rerun holds the same bytes on the server: nothing uploaded, nothing in DIR rewritten.
    assert published.again.returncode == 0, published.again.stderr
    assert f"already on the server (same bytes) {wheel.name}" in published.again.stdout
    assert tree(site) == published.site_after_first


def as_documented(line: str, published: Published, site_url: str) -> list[str]:
    line = line.replace(DOC_SERVER, published.server.url).replace(DOC_SITE, site_url).replace(DOC_KEY, published.public)
    return shlex.split(line.replace(f"vllm-{DOC_VLLM}.txt", f"vllm-{published.vllm}.txt"))


def server_install_lines() -> dict[str, list[str]]:
    blocks = user_install_blocks(DOC.read_text(encoding="utf-8"), "server-install")
    assert set(blocks) == {"pip", "uv"}, f"docs/overlay.md: server-install blocks {sorted(blocks)}"
    return blocks


def fresh_venv(root: Path, vllm_wheel: Path) -> Path:
    """A venv with the head's vLLM and FlashInfer as a user's install leaves them (test_user_install's shortcut)."""
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    (bundled,) = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))  # a user's venv has pip
    install_no_deps(python, str(vllm_wheel), tag_facts.head().flashinfer, str(bundled))
    requirements_met(python, ["vllm", "flashinfer-python"])
    lend_test_env(python)
    return env_dir


def shell_env(env_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV", "VLLM_FUSED_MOE"))}
    path = os.pathsep.join([str(env_dir / "bin"), str(Path(uv_binary()).parent), env.get("PATH", "")])
    env.update(PATH=path, VIRTUAL_ENV=str(env_dir), PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_the_documented_install_from_the_server_and_the_doctors_verified_evidence(
    published: Published, tmp_path: Path
) -> None:
    assert published.first.returncode == 0, published.first.stderr
    blocks = server_install_lines()
    env_dir = fresh_venv(tmp_path, pypi_wheel(tag_facts.head().tag))
    env = shell_env(env_dir)
    version = published.wheel.name.split("-")[1]
    with served(published.site) as site_url:
        for kind in ("pip", "uv"):
            if kind == "uv":  # the same venv, the overlay removed: uv installs it anew
                gone = run([uv_binary(), "pip", "uninstall", "--python", str(env_dir / "bin" / "python"),
                            "vllm-fused-moe"], env)  # fmt: skip
                assert gone.returncode == 0, gone.stderr
            steps = [run(as_documented(line, published, site_url), env) for line in blocks[kind]]
            said = "\n".join(f"$ {shlex.join(s.args)}\n{s.stdout}{s.stderr}" for s in steps)
            print(said)  # the closing note of issue 47 quotes it
            assert all(s.returncode == 0 for s in steps), said
            assert f"vllm-fused-moe {version}" in said or f"vllm-fused-moe=={version}" in said, said
            assert f"signed evidence   verified: {published.wheel.name}" in said, said
        # Both doctors: the installed one (--json: which key signed what) and `python -m release doctor`.
        installed = run([str(env_dir / "bin" / "python"), "-m", "vllm_fused_moe", "doctor", "--json",
                         "--index-url", site_url, "--evidence-key", published.public], env)  # fmt: skip
        report = validate(json.loads(installed.stdout))
        checked = release_cli("doctor", "--python", str(env_dir), "--index-url", site_url, "--evidence-key",
                              published.public, env=env)  # fmt: skip
    signed = report["attestation"]
    assert signed["status"] == "verified", signed
    assert (signed["verified_by"], signed["subject"]) == (published.fingerprint, published.wheel.name)
    assert signed["signed_by"] == [published.fingerprint] and report["evidence"]["found"]
    assert f"signed evidence   verified: {published.wheel.name}" in checked.stdout, checked.stdout + checked.stderr


def envelope(published: Published) -> dict[str, object]:
    found: dict[str, object] = json.loads(
        (published.site / "evidence" / f"{published.wheel.name}.intoto.jsonl").read_bytes()
    )
    return found


@pytest.mark.parametrize(
    "case", ["as published", "tampered", "foreign key", "unsigned", "missing", "other wheel", "other evidence",
             "no key pinned", "no cryptography"]
)  # fmt: skip
def test_the_doctor_names_what_is_wrong_with_the_signed_evidence(
    published: Published, tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert published.first.returncode == 0, published.first.stderr
    site = tmp_path / "site"
    shutil.copytree(published.site, site)
    name = published.wheel.name
    path = site / "evidence" / f"{name}.intoto.jsonl"
    pinned: str | None = published.public
    data = envelope(published)
    if case == "tampered":  # the statement says FAILED now; the signature is the one publish made
        statement = attest.payload_of(path.read_bytes())
        statement["predicate"]["result"] = "FAILED"
        data["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
        path.write_text(json.dumps(data))
    elif case == "foreign key":  # the operator pins another key than the one that signed
        (tmp_path / "other.pem").write_bytes(attest.new_key_pem())
        other = attest.load_signer(tmp_path / "other.pem")
        assert other is not None
        pinned = f"ed25519:{attest.public_hex(other)}"
    elif case == "unsigned":
        data["signatures"] = []
        path.write_text(json.dumps(data))
    elif case == "missing":
        path.unlink()
    elif case == "other wheel":  # a real signature of our key, on another wheel's statement, under this name
        signer = attest.load_signer(published.key)
        assert signer is not None
        statement = attest.payload_of(path.read_bytes())
        statement["subject"][0]["name"] = name.replace("+fm.", "+fm.9")
        path.write_bytes(attest.envelope_line(statement, signer))
    elif case == "other evidence":
        evidence = site / "evidence" / f"{name}.json"
        evidence.write_bytes(evidence.read_bytes().replace(b'"fixed"', b'"not affected"'))
    elif case == "no key pinned":
        pinned = None
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
        monkeypatch.delenv("VLLM_FUSED_MOE_EVIDENCE_KEY", raising=False)
    elif case == "no cryptography":  # a double of an environment without it: its import fails
        monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.asymmetric.ed25519", None)
    read = doctor_module().attestation.verify_attestation(site.as_uri(), name, pinned, timeout=5)
    expected = {"as published": "verified", "tampered": "bad-signature", "foreign key": "foreign-key",
                "unsigned": "unsigned", "missing": "missing", "other wheel": "other-wheel",
                "other evidence": "other-evidence", "no key pinned": "no-key",
                "no cryptography": "cannot-verify"}[case]  # fmt: skip
    assert read.status == expected, read
    assert (read.problem is None) == (case == "as published"), read
    if case == "no cryptography":
        assert "install cryptography" in str(read.problem)


def test_a_wheel_swapped_on_the_server_is_refused_by_pip_and_by_publish(published: Published, tmp_path: Path) -> None:
    assert published.first.returncode == 0, published.first.stderr
    held = published.server.packages / published.wheel.name
    original = held.read_bytes()
    requirements = tmp_path / "requirements.txt"
    shutil.copy(published.site / "requirements" / f"vllm-{published.vllm}.txt", requirements)
    try:
        held.write_bytes(original + b"\0")  # the server's file under our name, other bytes
        page = f"{published.server.url}/simple/vllm-fused-moe/"
        dry_run = ["--dry-run", "--ignore-installed", "--no-deps", "--no-index", "--find-links", page]
        pip = run(
            [sys.executable, "-m", "pip", "install", *dry_run, "-r", str(requirements)],
            {**os.environ, "PIP_CONFIG_FILE": os.devnull},
        )
        assert pip.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in pip.stderr, pip.stderr
        again = release_cli("publish", "--allow-dirty", str(published.wheel), str(tmp_path / "site"), "--to",
                            published.server.url, "--signing-key", str(published.key))  # fmt: skip
        assert again.returncode == 2 and "error[server-clash]" in again.stderr, again.stderr
        assert held.read_bytes() == original + b"\0" and not (tmp_path / "site" / "requirements").exists()
    finally:
        held.write_bytes(original)


def test_an_upload_the_server_refuses_names_no_password(published: Published, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = secrets.token_urlsafe(18)
    monkeypatch.setenv("TWINE_USERNAME", USER)
    monkeypatch.setenv("TWINE_PASSWORD", wrong)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    before = sorted(p.name for p in published.server.packages.iterdir())
    with pytest.raises(UploadError) as refused:
        upload(twine_settings(ServerTarget(published.server.url)), [published.wheel])
    said = str(refused.value)
    assert wrong not in said and ("401" in said or "403" in said), said
    assert sorted(p.name for p in published.server.packages.iterdir()) == before
