"""What the doctor finds and concludes: frozen dataclasses, each with its part of the JSON report.

`to_json()` writes a record as docs/doctor.schema.json has it; `Report.from_json()` reads a whole
report back (`python -m release doctor` renders the report another interpreter wrote). A field with
`metadata={"json": False}` is the doctor's own and never in the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from typing import Any

from .words import REPORT_SCHEMA, BackendFrom, ScanSource, Status, Verdict

# The JSON document: the scan data read, and the report written (their shapes: the schemas).
Json = dict[str, Any]
OWN = {"json": False}  # a field that is not part of the report


def to_json(value: object) -> Any:
    """A record (and what it holds) as the report's JSON values: enums by their word, tuples as lists."""
    if is_dataclass(value) and not isinstance(value, type):
        return {
            f.metadata.get("key", f.name): to_json(getattr(value, f.name))
            for f in fields(value)
            if f.metadata.get("json", True)
        }
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [to_json(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): to_json(item) for key, item in value.items()}
    return value


def strings(value: object) -> tuple[str, ...]:
    """A JSON list of names as a tuple of str (anything else: none)."""
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


@dataclass(frozen=True)
class ScanData:
    """The scan data (affected-releases.json, schema 1), as far as the doctor reads it."""

    scanned: tuple[str, ...]
    newest_scanned: str | None
    fixed_in: str | None
    releases: Mapping[str, Json]
    bugs: Mapping[str, Json]
    lines: Mapping[str, Json]

    @classmethod
    def from_json(cls, data: Json) -> ScanData:
        def table(key: str) -> Mapping[str, Json]:
            found = data.get(key)
            return {str(k): v for k, v in found.items() if isinstance(v, dict)} if isinstance(found, dict) else {}

        scanned = strings(data.get("scanned"))
        newest = data.get("newest_scanned") or (scanned[-1] if scanned else None)
        fixed = data.get("fixed_in")
        return cls(scanned, str(newest) if newest else None, str(fixed) if fixed else None,
                   table("releases"), table("bugs"), table("lines"))  # fmt: skip


@dataclass(frozen=True)
class ScanRead:
    """`scan` of the report: which scan data was read, from where, or why none could be."""

    path: str | None
    source: ScanSource
    problem: str | None
    oldest_scanned: str | None
    newest_scanned: str | None


@dataclass(frozen=True)
class Bug:
    """One bug our patches fix, as the installed release has it (`release.bugs.<id>`)."""

    status: str
    title: str
    patches: tuple[str, ...]


@dataclass(frozen=True)
class Release:
    """`release` of the report: what the scan data says about the installed vLLM release."""

    status: Status
    why: str
    fixed_in: str | None = None
    line: str | None = None
    in_train: bool | None = None
    patches: Mapping[str, str] = field(default_factory=dict)
    wheel: str | None = None
    flashinfer: str | None = None
    bugs: Mapping[str, Bug] = field(default_factory=dict)
    needs: tuple[str, ...] = ()  # the bugs this release is affected by: what an overlay for it must carry
    optional_overlay: bool = False  # not affected, yet an overlay with downstream changes is published for it


@dataclass(frozen=True)
class CarriedPatch:
    """A patch the installed overlay carries (its _build_info.json `patches`)."""

    name: str | None
    bug: str | None  # None: a build older than `bug` (its Bug: trailer says it)
    trailers: Mapping[str, str]

    @classmethod
    def from_json(cls, data: Json) -> CarriedPatch:
        trailers = data.get("trailers")
        bug = data.get("bug")
        return cls(
            str(data["name"]) if data.get("name") is not None else None,
            str(bug) if bug is not None else None,
            {str(k): str(v) for k, v in trailers.items()} if isinstance(trailers, dict) else {},
        )


@dataclass(frozen=True)
class Overlay:
    """`overlay` of the report: is our overlay installed here, for which tag, does the hook activate it."""

    installed: bool = False
    version: str | None = None
    vllm_tag: str | None = None
    location: str | None = None
    mode: str | None = None
    hook_installed: bool = False
    for_this_vllm: bool = False
    activates: bool | None = None
    reason: str | None = None
    flashinfer_specifier: str | None = None
    patches: tuple[str | None, ...] = ()
    bugs: tuple[str, ...] = ()  # the bugs its patches fix
    missing_fixes: tuple[str, ...] = ()  # the release's bugs (release.needs) none of its patches fixes
    carried: tuple[CarriedPatch, ...] = field(default=(), metadata=OWN)
    # An install pip keeps as it is (`Requirement already satisfied`) though it serves nothing: its
    # record without its package, an overlay that cannot be read, files missing. The fix forces it.
    damaged: bool = field(default=False, metadata=OWN)
    # Its .dist-info/RECORD gone: pip cannot uninstall it, so the fix installs over it (--ignore-installed).
    record_lost: bool = field(default=False, metadata=OWN)
    # With RECORD gone: the files of the install, for their removal by hand (pip uninstall cannot).
    leftovers: tuple[str, ...] = field(default=(), metadata=OWN)


@dataclass(frozen=True)
class LiveClass:
    """One class --live looked for in the module vLLM builds it from."""

    found: bool
    module: str | None = None
    file: str | None = None
    output_is_reduced: bool | None = None
    served_by_overlay: bool | None = None


@dataclass(frozen=True)
class Live:
    """`live` of the report: what vLLM's own import resolves, and what output_is_reduced() says."""

    module: str
    error: str | None = None
    seconds: float = 0.0
    hook_active: bool | None = None
    classes: Mapping[str, LiveClass] = field(default_factory=dict)

    def reduced(self) -> bool | None:
        """What the classes found say together (None: the import failed, or none was found)."""
        found = [c for c in self.classes.values() if c.found]
        return all(bool(c.output_is_reduced) for c in found) if found and not self.error else None


@dataclass(frozen=True)
class ServeRange:
    """A serve range of a release line (scan data `lines.<line>.serve[]`, from patches/lines.toml)."""

    releases: str
    all2all_backends: tuple[str, ...] = ()
    backend_env: str | None = None  # a BackendEnv word; None: the data does not say
    dp_chunked: tuple[str, ...] = ()
    dp_chunk_env: str | None = None

    @classmethod
    def from_json(cls, data: Json) -> ServeRange:
        env, switch = data.get("backend_env"), data.get("dp_chunk_env")
        return cls(str(data["releases"]), strings(data.get("all2all_backends")), str(env) if env else None,
                   strings(data.get("dp_chunked")), str(switch) if switch else None)  # fmt: skip


@dataclass(frozen=True)
class ServeFacts:
    """How the installed release reads `vllm serve`: its line's `builds` and the serve range holding it."""

    version: str
    line: str | None
    builds: Mapping[str, str] = field(default_factory=dict)
    range: ServeRange | None = None


@dataclass(frozen=True)
class EnvRead:
    """A variable of the serve environment that the command-line check read, and where it came from."""

    value: str
    source: str = field(metadata={"key": "from"})  # "--env" or "environment"


@dataclass(frozen=True)
class Serve:
    """`serve` of the report: what a `vllm serve` command line meets on the installed release."""

    argv: tuple[str, ...]
    all2all_backend: str
    backend_from: BackendFrom
    all2all_backends: tuple[str, ...] | None
    refused: str | None
    tensor_parallel_size: int
    data_parallel_size: int
    prefill_context_parallel_size: int
    expert_parallel: bool
    ep_size: int
    uses_affected_class: str | None
    dp_chunked: bool | None
    environment: Mapping[str, EnvRead]
    reduce_runs: bool
    conclusive: bool
    why: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Fix:
    """`fix` of the report: the command that makes the fix live here, or why there is none."""

    command: str | None
    argv: tuple[str, ...] | None
    check: tuple[str, ...] | None
    why: str


@dataclass(frozen=True)
class EvidenceBug:
    """One bug of the evidence `publish` kept beside the installed wheel."""

    bug: str
    verdict: str  # "fixed", "not affected" (what publish accepts), else "unproven"
    test: str


@dataclass(frozen=True)
class EvidenceRead:
    """`evidence` of the report: what the index says the installed wheel proved (INDEX_DIR/evidence/<wheel>.json)."""

    url: str
    wheel: str
    found: bool = False
    problem: str | None = None
    wheel_sha256: str | None = None
    vllm_tag: str | None = None
    line: str | None = None
    bugs: tuple[EvidenceBug, ...] = ()


@dataclass(frozen=True)
class AttestationRead:
    """`attestation` of the report: the installed wheel's signed evidence (INDEX_DIR/evidence/<wheel>.intoto.jsonl),
    judged against the pinned key (_doctor/attestation.py; issue 47)."""

    url: str
    wheel: str
    status: str  # "verified", else the finding's name (docs/doctor.md, "Signed evidence")
    problem: str | None = None
    pinned_key: str | None = None  # the pinned key's fingerprint (keyid)
    pinned_from: str | None = None  # --evidence-key, $VLLM_FUSED_MOE_EVIDENCE_KEY or the config file
    signed_by: tuple[str, ...] = ()  # the key ids the envelope's signatures name
    verified_by: str | None = None  # the key whose signature verified (the pinned one)
    subject: str | None = None
    subject_sha256: str | None = None
    result: str | None = None  # the statement's PASSED / FAILED


@dataclass(frozen=True)
class Facts:
    """Everything the doctor found, before it judges."""

    doctor: str
    python: str
    vllm: str | None
    flashinfer: str | None
    scan: ScanRead
    release: Release
    overlay: Overlay
    live: Live | None = None
    serve: Serve | None = None
    evidence: EvidenceRead | None = None
    attestation: AttestationRead | None = None


@dataclass(frozen=True)
class Report:
    """The facts, the verdict, its one-line summary and the fix: the report (`--json`: docs/doctor.schema.json)."""

    facts: Facts
    verdict: Verdict
    summary: str
    fix: Fix | None

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    def to_json(self) -> Json:
        facts = self.facts
        return {
            "schema": REPORT_SCHEMA,
            "doctor": facts.doctor,
            "python": facts.python,
            "vllm": {"version": facts.vllm},
            "flashinfer": {"version": facts.flashinfer},
            "scan": to_json(facts.scan),
            "release": to_json(facts.release),
            "overlay": to_json(facts.overlay),
            "live": None if facts.live is None else live_json(facts.live),
            "serve": to_json(facts.serve),
            "evidence": to_json(facts.evidence),
            "attestation": to_json(facts.attestation),
            "verdict": self.verdict.value,
            "exit_code": self.exit_code,
            "summary": self.summary,
            "fix": to_json(self.fix),
        }


def live_json(live: Live) -> Json:
    """`live` of the report: a class not found is `{"found": false}` alone."""
    data: Json = to_json(live)
    data["classes"] = {n: {"found": False} if not c.found else to_json(c) for n, c in live.classes.items()}
    return data


def record(cls: type[Any], data: Json, **given: Any) -> Any:
    """The record `cls` from its JSON (lists as tuples); `given`: the fields that need more than that."""
    values = dict(given)
    for f in fields(cls):
        if f.metadata.get("json", True) and f.name not in given:
            value = data[f.metadata.get("key", f.name)]
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


def report_from_json(data: Json) -> Report:
    """A report read back from its JSON (the schema's shape: `release doctor` checked it is a report)."""
    release, live, serve, fix = data["release"], data["live"], data["serve"], data["fix"]
    evidence, attestation = data.get("evidence"), data.get("attestation")
    facts = Facts(
        doctor=str(data["doctor"]),
        python=str(data["python"]),
        vllm=data["vllm"]["version"],
        flashinfer=data["flashinfer"]["version"],
        scan=record(ScanRead, data["scan"], source=ScanSource(data["scan"]["source"])),
        release=record(
            Release,
            release,
            status=Status(release["status"]),
            bugs={bug: record(Bug, info) for bug, info in release["bugs"].items()},
        ),
        overlay=record(Overlay, data["overlay"]),
        live=None
        if live is None
        else record(Live, live, classes={n: LiveClass(**c) for n, c in live["classes"].items()}),
        serve=None
        if serve is None
        else record(
            Serve,
            serve,
            backend_from=BackendFrom(serve["backend_from"]),
            environment={n: EnvRead(e["value"], e["from"]) for n, e in serve["environment"].items()},
        ),
        evidence=None
        if evidence is None
        else record(EvidenceRead, evidence, bugs=tuple(EvidenceBug(**b) for b in evidence["bugs"])),
        attestation=None if attestation is None else record(AttestationRead, attestation),
    )
    return Report(facts, Verdict(data["verdict"]), str(data["summary"]), None if fix is None else record(Fix, fix))
