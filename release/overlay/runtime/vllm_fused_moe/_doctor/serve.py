"""What a `vllm serve` command line asks of the installed release: does it meet the double reduce?

The rule, from vLLM's code: the FlashInfer all-to-all classes are built only when
`use_all2all_kernels` holds (expert parallel on, data parallel > 1); the MoE layer then has
ep_size = DP x PCP x TP, and the output is all-reduced over the TP group again unless
output_is_reduced(): by the runner or layer (MoERunner._maybe_reduce_final_output,
DefaultMoERunner._maybe_reduce_output, FusedMoE.forward_native), except on the DP-chunked path, and
before 0.20.0 also by every model that all-reduces its MoE output itself
(maybe_all_reduce_tensor_model_parallel), on either path. An all-reduce over a TP group of one rank
is the identity: TP 1 is never hit. Each release reads the command line as its line's data in the
scan data says (`lines.<line>`: `builds` and the `serve` range holding it; patches/lines.toml).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .records import EnvRead, ScanData, Serve, ServeFacts, ServeRange
from .words import AFFECTED_BACKENDS, BACKEND_ENV, DEFAULT_BACKEND, DP_CHUNK_ENV, BackendEnv, BackendFrom

ALIASES = {
    "-tp": "--tensor-parallel-size",
    "-dp": "--data-parallel-size",
    "-pcp": "--prefill-context-parallel-size",
    "-ep": "--enable-expert-parallel",
}
WANTED = ("--all2all-backend", "--tensor-parallel-size", "--data-parallel-size", "--prefill-context-parallel-size")
COMPARE: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
}


def in_releases(version: str, specifier: str) -> bool | None:
    """Is `version` in the PEP 440 `specifier` (None: cannot tell)? packaging where it is installed
    (vLLM depends on it); without it, the `>=X,<Y` / `==X` clauses patches/lines.toml uses."""
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion
    except ImportError:
        return in_releases_plain(version, specifier)
    try:
        return SpecifierSet(specifier).contains(version, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return None


def in_releases_plain(version: str, specifier: str) -> bool | None:
    def release(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", text.split("+", 1)[0]))

    for clause in specifier.split(","):
        match = re.fullmatch(r"\s*(==|!=|>=|<=|>|<)\s*(\d+(?:\.\d+)*)\s*", clause)
        if match is None:
            return None
        if not COMPARE[match.group(1)](release(version), release(match.group(2))):
            return False
    return True


def serve_facts(scan: ScanData | None, line: str | None, version: str | None) -> ServeFacts | None:
    """How the installed release reads `vllm serve`, from the scan data (`lines.<line>`: `builds` and
    the `serve` range holding `version`). No `builds` or `range` where the data has none for it; None
    without a vLLM version."""
    if version is None:
        return None
    info = scan.lines.get(line or "") if scan else None
    if info is None:
        return ServeFacts(version, line)
    builds = info.get("builds")
    ranges = [r for r in info.get("serve") or [] if isinstance(r, dict) and isinstance(r.get("releases"), str)]
    chosen = next((r for r in ranges if in_releases(version, r["releases"])), None)
    return ServeFacts(
        version,
        line,
        {str(k): str(v) for k, v in builds.items()} if isinstance(builds, dict) else {},
        ServeRange.from_json(chosen) if chosen else None,
    )


@dataclass(frozen=True)
class CommandLine:
    """The options of a command line that the rule reads, as vLLM's parser reads them."""

    values: Mapping[str, str]
    expert_parallel: bool
    conclusive: bool  # False: a --config or --parallel-config may set them too
    notes: tuple[str, ...]


def parse_command_line(argv: list[str]) -> CommandLine:
    args = argv[2:] if argv[:2] == ["vllm", "serve"] else list(argv)
    values: dict[str, str] = {}
    expert_parallel, conclusive, notes = False, True, []
    index = 0
    while index < len(args):
        key, eq, value = args[index].partition("=")
        index += 1
        if key.startswith("--"):
            key = "--" + key[2:].replace("_", "-")  # vLLM's parser accepts --data_parallel_size too
        key = ALIASES.get(key, key)
        if key in ("--enable-expert-parallel", "--no-enable-expert-parallel"):
            expert_parallel = key == "--enable-expert-parallel"
        elif key in WANTED:
            if not eq:
                value = args[index] if index < len(args) else ""
                index += 1
            values[key] = value
        elif key == "--config" or key.startswith("--config."):
            conclusive = False
            notes.append("a --config file can set these options too; it is not read, only the command line")
        elif key == "--parallel-config" or key.startswith("--parallel-config."):
            conclusive = False
            notes.append("--parallel-config is not read, only the flat options")
    return CommandLine(values, expert_parallel, conclusive, tuple(notes))


@dataclass
class Reading:
    """The check under way: the serve environment, the variables read from it, the notes so far."""

    env: Mapping[str, str]
    given: frozenset[str]  # the variables that came from --env
    version: str
    notes: list[str]
    read: dict[str, EnvRead] = field(default_factory=dict)
    refused: str | None = None

    def get(self, name: str) -> str | None:
        if name not in self.env:
            return None
        self.read[name] = EnvRead(self.env[name], "--env" if name in self.given else "environment")
        return self.env[name]

    def refuse(self, why: str) -> None:
        self.refused = self.refused or why

    def size(self, values: Mapping[str, str], option: str) -> int:
        try:
            return max(int(values.get(option, "1")), 1)
        except ValueError:
            self.notes.append(f"{option} {values[option]!r} is not an integer; taken as 1")
            return 1


def choose_backend(flag: str | None, span: ServeRange | None, reading: Reading) -> tuple[str, BackendFrom]:
    """The all2all backend vLLM takes: --all2all-backend or VLLM_ALL2ALL_BACKEND as the release reads them."""
    choices, version = span.all2all_backends if span else (), reading.version
    if flag is not None and choices and flag not in choices:
        reading.refuse(f"--all2all-backend {flag} is not one of {', '.join(choices)}")
    mode = span.backend_env if span else None
    env_value = reading.get(BACKEND_ENV)
    if mode == BackendEnv.OVERRIDES.value and env_value is not None:
        backend, source = env_value, BackendFrom.ENV
        if flag is not None:
            reading.notes.append(
                f"{BACKEND_ENV}={env_value} is set: vLLM {version} takes it over --all2all-backend {flag}"
            )
    elif mode == BackendEnv.FALLBACK.value and flag is None and env_value is not None:
        backend, source = env_value, BackendFrom.ENV
    elif flag is not None:
        backend, source = flag, BackendFrom.FLAG
    else:
        backend, source = DEFAULT_BACKEND, BackendFrom.DEFAULT
    if env_value is not None and source is not BackendFrom.ENV:
        reading.notes.append(
            f"{BACKEND_ENV}={env_value} is set, but "
            + {
                BackendEnv.IGNORED.value: f"vLLM {version} does not read it",
                BackendEnv.FALLBACK.value: f"vLLM {version} reads it only without --all2all-backend",
            }.get(str(mode), f"whether vLLM {version} reads it is not in the scan data")
        )
    if source is BackendFrom.ENV and choices and backend not in choices:
        reading.refuse(f"{BACKEND_ENV}={backend} is not one of {', '.join(choices)}")
    return backend, source


def dp_chunking(span: ServeRange | None, backend: str, uses: bool, reading: Reading) -> tuple[bool | None, str]:
    """(on the DP-chunked path, why): where the range lists the backend, as its switch says."""
    if span is None:
        return None, ""
    switch, chunked, why = span.dp_chunk_env, False, ""
    if backend in span.dp_chunked:
        chunked, why = True, "always (no switch)"
        if switch:
            raw = reading.get(switch) if uses else None
            try:
                chunked = raw is None or bool(int(raw))
            except ValueError:
                reading.refuse(
                    f"{switch}={raw!r} is not an integer (vLLM {reading.version} reads it with int() once the "
                    f"{backend} kernels run)"
                )
            why = f"{switch}={raw}" if raw is not None else f"{switch} unset, default 1"
    elif switch and switch in reading.env:
        reading.get(switch)
        reading.notes.append(f"{switch} only switches the DP-chunked path of {', '.join(span.dp_chunked)} here")
    if not switch and DP_CHUNK_ENV in reading.env:
        reading.get(DP_CHUNK_ENV)
        reading.notes.append(f"vLLM {reading.version} has no DP-chunking switch: {DP_CHUNK_ENV} is not read")
    return chunked, why


@dataclass(frozen=True)
class Layout:
    """What the command line builds: the backend, the parallel sizes, the class, the DP-chunked path."""

    backend: str
    source: BackendFrom
    cls: str | None
    tp: int
    dp: int
    expert_parallel: bool
    ep_size: int
    chunked: bool | None
    chunk_why: str


def serve_layout(
    argv: list[str], env: Mapping[str, str], facts: ServeFacts | None = None, given: frozenset[str] = frozenset()
) -> Serve:
    """Does this `vllm serve` command line, in environment `env`, meet the double reduce on the installed
    release? `facts` (serve_facts()) say which values --all2all-backend accepts, how VLLM_ALL2ALL_BACKEND
    is read, which class each backend builds, and which backends take the DP-chunked path under which
    variable; without them, the head line's classes and no check of the choices. `given`: the
    variables that came from --env (the rest from this process's environment)."""
    line = parse_command_line(argv)
    span = facts.range if facts else None
    reading = Reading(env, given, facts.version if facts else "installed", list(line.notes))
    backend, source = choose_backend(line.values.get("--all2all-backend"), span, reading)
    tp, dp, pcp = (reading.size(line.values, o) for o in WANTED[1:])
    builds = (facts.builds if facts else None) or AFFECTED_BACKENDS
    cls = builds.get(backend)
    uses = cls is not None and line.expert_parallel and dp > 1
    chunked, chunk_why = dp_chunking(span, backend, uses, reading)
    ep_size = dp * pcp * tp if line.expert_parallel else 1
    layout = Layout(backend, source, cls, tp, dp, line.expert_parallel, ep_size, chunked, chunk_why)
    why = layout_why(layout, facts, reading.version)
    choices = span.all2all_backends if span else ()
    if not choices:
        reading.notes.append(
            f"the scan data does not list the --all2all-backend values of vLLM {reading.version}: "
            "not checked against them"
        )
    return Serve(
        tuple(argv), backend, source, choices or None, reading.refused, tp, dp, pcp, line.expert_parallel, ep_size,
        cls if uses else None, chunked if uses else None, reading.read, uses and tp > 1, line.conclusive, why,
        tuple(reading.notes),
    )  # fmt: skip


def layout_why(layout: Layout, facts: ServeFacts | None, version: str) -> str:
    """In words: why this command line does or does not reduce the output twice."""
    backend, source, cls, tp, dp = layout.backend, layout.source.value, layout.cls, layout.tp, layout.dp
    if cls is None:
        why = f"all2all backend {backend} ({source}) does not build a FlashInfer all-to-all class"
        if facts and facts.builds:
            why += f" on vLLM {version} (line {facts.line}: {', '.join(sorted(facts.builds))} do)"
        return why
    if not layout.expert_parallel:
        return f"{backend} is only used with --enable-expert-parallel"
    if dp == 1:
        return f"{backend} is only used with --data-parallel-size > 1 (all2all kernels need DP > 1 and EP)"
    if tp == 1:
        return (
            f"{backend} ({source}) with EP and DP {dp} builds {cls}, but with tensor parallel 1 the "
            "all-reduce over the TP group changes nothing: the output is not reduced twice"
        )
    if layout.chunked:
        return (
            f"{backend} ({source}) with EP, DP {dp} and TP {tp} builds {cls} on vLLM {version}'s DP-chunked "
            f"path ({layout.chunk_why}): the layer's own final all-reduce is skipped there, but a model that "
            "all-reduces its MoE output itself (deepseek_v2, qwen3_moe, nemotron_h, ...) still reduces it "
            "again, and where the layer reduces instead its shared experts stay unreduced; only a model "
            "without shared experts that leaves the reduce to the layer escapes"
        )
    why = (
        f"{backend} ({source}) with EP, DP {dp} and TP {tp} builds {cls}; its MoE layers have ep_size "
        f"{layout.ep_size}, so the output is all-reduced over the TP group again unless output_is_reduced()"
    )
    return why + (
        f" ({layout.chunk_why}: not the DP-chunked path)" if layout.chunked is False and layout.chunk_why else ""
    )
