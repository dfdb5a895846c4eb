"""`publish DIST DIR --to URL`: our wheels into an index server, their requirements files and evidence into DIR.

Most teams' internal index is a server they upload to (devpi, pypiserver, Artifactory, Nexus, GitLab,
CodeArtifact, Artifact Registry); the one protocol they share is the legacy upload API `twine upload`
speaks, so twine's library uploads (its credential lookup too: TWINE_USERNAME/TWINE_PASSWORD, keyring,
~/.pypirc; a credential is never printed, and every URL we print has its user and password removed).
None of those servers hosts arbitrary files, so DIR (served statically, or committed where operators take
them from) gets requirements/vllm-X.txt and evidence/<wheel>.json (+ .intoto.jsonl), as a directory index has.

In order, every refusal before the first upload: the wheels (readable, ours, clean, no fix missing); the
server's simple page (SIMPLE_URL/vllm-fused-moe/, read through release/pristine/transport.py): a wheel it
holds with the same sha256 is not uploaded again, one it holds with other bytes (or lists without a
sha256) is refused, as pip would cache either under that name; then each wheel's evidence. After the
upload the page is read again: a file the server lists with other bytes than ours is an error, never
pinned. The requirements files pin, per vLLM release, the newest wheel the server lists whose evidence DIR
holds for the same sha256: a file someone else put on the server is never pinned.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import urllib.parse
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from release.core import log
from release.core.errors import BadInputError, PackageIndexError, ServerClashError, UploadError
from release.core.journal import write_atomic
from release.core.lock import index_lock
from release.core.text import escaped
from release.evidence.gather import refuse, refuse_backwards
from release.evidence.record import EVIDENCE, EvidenceRecord, has_record, held_records
from release.model.wheel import OverlayWheel
from release.overlay.attest import load_signer, sign_published
from release.overlay.fixes import refuse_wheels_missing_fixes
from release.overlay.index_plan import read_candidates
from release.overlay.pages import REQUIREMENTS, requirements_text
from release.overlay.project import PROJECT
from release.overlay.publish import PublishOptions, prove, refuse_as_check
from release.overlay.wheel import WheelReads
from release.pristine import transport
from release.pristine.index import JSON_ACCEPT, PAGE_LIMIT, SHA256_RE, parse_project_page
from release.queue.snapshot import Checkout


@dataclass(frozen=True)
class ServerTarget:
    """Where `publish --to` uploads, and the simple page it reads."""

    to: str  # the upload URL (the legacy API), or a repository name of ~/.pypirc
    simple: str | None = None  # the server's simple index (default: TO/simple/)

    def simple_url(self, upload_url: str) -> str:
        base = self.simple or upload_url.rstrip("/") + "/simple/"
        return base if base.endswith("/") else base + "/"


def redact(text: str, *secrets: str | None) -> str:
    """`text` with every URL's user and password, and every secret, replaced by `***`."""

    def clean(word: str) -> str:
        parts = urllib.parse.urlsplit(word)
        if parts.scheme and "@" in parts.netloc:
            return urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))
        return word

    out = " ".join(clean(word) for word in text.split(" "))
    for secret in secrets:
        if secret:
            out = out.replace(secret, "***")
    return out


def server_files(project_url: str) -> dict[str, str | None]:
    """{file name: sha256 (None where the page gives none)} of our project's page on the server; {} on 404."""
    shown = redact(project_url)
    found: dict[str, str | None] = {}

    def expect(answer: transport.Answer) -> None:
        if answer.status != 404 and not 200 <= answer.status < 300:
            raise PackageIndexError(f"the index server answered HTTP {answer.status} for {shown}")

    answer, body = transport.get(
        project_url,
        f"the index server's page {shown}",
        headers={"Accept": JSON_ACCEPT},
        expect=expect,
        limit=PAGE_LIMIT,
    )
    if answer.status == 404:
        return found  # the server holds nothing of ours yet
    page = parse_project_page(shown, answer.headers.get("Content-Type", ""), body.decode("utf-8", "replace"), PROJECT)
    for package in page.packages:
        name = package.filename or urllib.parse.unquote(urllib.parse.urlsplit(package.url).path.rsplit("/", 1)[-1])
        sha = (package.digests.get("sha256") or "").lower()
        found[name] = sha if SHA256_RE.match(sha) else None
    return found


def twine_settings(target: ServerTarget) -> object:
    """twine's Settings for the target, with its credentials looked up as `twine upload` does (no prompt)."""
    from twine.settings import Settings  # imported here: only `publish --to` pays for twine's imports

    parser = argparse.ArgumentParser(add_help=False)
    Settings.register_argparse_arguments(parser)
    where = ["--repository-url", target.to] if "://" in target.to else ["--repository", target.to]
    return Settings.from_argparse(parser.parse_args([*where, "--non-interactive", "--disable-progress-bar"]))


def upload(settings: object, wheels: list[Path]) -> None:
    """Upload `wheels` with twine's library; its own output goes to the debug log, redacted."""
    from twine.commands.upload import upload as twine_upload
    from twine.exceptions import TwineException
    from twine.settings import Settings

    assert isinstance(settings, Settings)
    said = io.StringIO()
    password = None
    try:
        password = settings.password
        with contextlib.redirect_stdout(said):
            twine_upload(settings, [str(w) for w in wheels])
    except (TwineException, OSError) as exc:  # requests' errors are OSErrors
        message = redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, password)
        raise UploadError(f"the upload to the index server failed: {message}") from None
    finally:
        for line in said.getvalue().splitlines():
            log.debug(redact(line, password))


def publish_to_server(checkout: Checkout, options: PublishOptions, target: ServerTarget) -> int:
    """Upload the wheels of `options.dist` to the server `target` names; write their requirements files and
    evidence (signed where `options.signing_key` or the environment gives a key) into `options.index`."""
    signer = load_signer(options.signing_key)  # an unusable key is refused before anything else
    dist, directory = options.dist, options.index.resolve()
    wheels = sorted(dist.glob("*.whl")) if dist.is_dir() else [dist]
    if not wheels or not wheels[0].exists():
        raise BadInputError(f"no wheel in {dist}", hint="build one with `python -m release build` (nox -s build)")
    ours = read_candidates(wheels, PROJECT, options.allow_dirty, WheelReads())
    refuse_wheels_missing_fixes(checkout, ours)
    settings = twine_settings(target)
    upload_url = str(getattr(settings, "repository_config", {}).get("repository") or target.to)
    simple = target.simple_url(upload_url)
    page = f"{simple}{PROJECT}/"
    held = server_files(page)
    new, already = [], []
    for wheel in ours:
        if wheel.name not in held:
            new.append(wheel)
        elif held[wheel.name] == wheel.sha256:
            already.append(wheel)
        else:
            other = (
                "lists it without a sha256" if held[wheel.name] is None else f"holds it with sha256 {held[wheel.name]}"
            )
            raise ServerClashError(
                f"the index server {redact(page)} {other}, not {wheel.sha256} ({wheel.name}); nothing was uploaded"
            )
    directory.mkdir(parents=True, exist_ok=True)
    evidence_dir = directory / EVIDENCE
    missing = [w for w in already if not has_record(directory, w.name, w.sha256)]
    kept = server_records(directory, held)
    # The same proof as a directory index's (release/overlay/publish.py): check's gates, each wheel the
    # checkout's own build of its tag, three runs per recorded bug.
    refuse_as_check(checkout, ours, options.allow_dirty)
    with ExitStack() as stack:
        proofs = prove(checkout, new + missing, options, kept, stack)
    for evidence in proofs:
        refuse(evidence, f"not publishing {evidence.wheel}")
        refuse_backwards(evidence, kept, f"not publishing {evidence.wheel}")
    if new:
        upload(settings, [w.path for w in new])
    after = server_files(page)
    for wheel in new + already:
        if after.get(wheel.name) != wheel.sha256:
            raise UploadError(
                f"the index server {redact(page)} lists {wheel.name} with sha256 {after.get(wheel.name)}, "
                f"not {wheel.sha256}: it does not serve the bytes uploaded; nothing was written to {directory}"
            )
    with index_lock(directory):
        if proofs:
            evidence_dir.mkdir(exist_ok=True)
        for evidence in proofs:
            write_atomic(evidence_dir / f"{evidence.wheel}.json", evidence.text())
        signed = sign_published(evidence_dir, {w.name: w.sha256 for w in new + already}, signer)
        written = write_requirements(directory, after)
    for wheel in new:
        log.out(f"uploaded {wheel.name}")
    for wheel in already:
        log.out(f"already on the server (same bytes) {wheel.name}")
    for name in signed:
        log.out(f"signed {EVIDENCE}/{name}")
    for path in written:
        log.out(f"wrote {path}")
    log.out(f"index: {redact(page)}")
    log.out(f"requirements and evidence: {directory}, to be served (or committed) where operators read them")
    log.out(
        f"install: python -m pip install --no-index --find-links {redact(page)} -r URL/{REQUIREMENTS}/vllm-X.txt "
        f"(URL: where {directory} is served; docs/overlay.md, 'Install')"
    )
    return 0


def server_records(directory: Path, listed: dict[str, str | None]) -> list[EvidenceRecord]:
    """The evidence DIR keeps, each bound to the wheel the server lists under its name (by sha256); any other
    file there proves nothing, and is said, as publish says it of a directory index."""
    records, problems = held_records(directory, listed.get)
    for problem in problems:
        log.note(escaped(f"note: {problem}: it proves nothing (a publish of that wheel writes its own evidence)"))
    return records


def write_requirements(directory: Path, listed: dict[str, str | None]) -> list[str]:
    """DIR/requirements/vllm-X.txt: per vLLM release X, the newest wheel the server lists whose evidence DIR
    holds for that very sha256 (what this tool published and proved); returns the files written."""
    proven = {record.wheel: record.sha256 for record in server_records(directory, listed)}
    newest: dict[str, OverlayWheel] = {}
    for name, sha256 in listed.items():
        if sha256 is None or proven.get(name) != sha256 or not (directory / EVIDENCE / f"{name}.json").is_file():
            continue
        try:
            project, version, _build, _tags = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        if project != PROJECT:
            continue
        wheel = OverlayWheel(Path(name), project, version, sha256, "")
        held = newest.get(wheel.vllm)
        if held is None or (wheel.version, wheel.name) > (held.version, held.name):
            newest[wheel.vllm] = wheel
    written = []
    (directory / REQUIREMENTS).mkdir(exist_ok=True)
    for vllm, wheel in sorted(newest.items()):
        path = directory / REQUIREMENTS / f"vllm-{vllm}.txt"
        text = requirements_text(wheel).encode()
        if not path.is_file() or path.read_bytes() != text:
            write_atomic(path, text)
            written.append(f"{REQUIREMENTS}/{path.name}")
    return written
