"""`--live`: the classes vLLM resolves here, imported as vLLM imports them, and what output_is_reduced() says.

It imports the one vLLM module that resolves the FlashInfer all-to-all prepare/finalize classes of the
installed release's line (the NVLink classes from 0.18.0; older lines' classes as the scan data names
them). No GPU and no process group are needed.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from .records import Live, LiveClass, ScanData
from .words import ALL2ALL_MODULE, CLASSES, MODE_ENV


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """vLLM and the hook log to stdout; keep stdout for the report (--json is machine-read)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def live_target(scan: ScanData | None, line: str | None) -> tuple[str, tuple[str, ...]]:
    """The module --live imports and the classes it reads there: the release line's, from the scan data."""
    facts = scan.lines.get(line or "") if scan else None
    live = facts.get("live") if facts else None
    if isinstance(live, dict):
        module, classes = live.get("module"), live.get("classes")
        if isinstance(module, str) and module and isinstance(classes, list) and classes:
            return module, tuple(str(name) for name in classes)
    return ALL2ALL_MODULE, CLASSES


def reduced_as_built(cls: Any) -> bool:
    """cls.output_is_reduced() on an instance set up as vLLM's factory builds it under data parallel:
    no __init__ (it needs the all2all manager of a GPU group), `use_dp` True where the constructor
    takes it (the 0.11-0.15 all-to-all class answers from it)."""
    import inspect

    instance = object.__new__(cls)
    if "use_dp" in inspect.signature(cls.__init__).parameters:
        instance.use_dp = True
    return bool(cls.output_is_reduced(instance))


def live_classes(overlay_dir: str | None, module_name: str = ALL2ALL_MODULE, names: tuple[str, ...] = CLASSES) -> Live:
    """Import the classes as vLLM does and read output_is_reduced() from each (no GPU, no process group)."""
    started = time.perf_counter()
    ours = str(Path(overlay_dir).resolve()) + os.sep if overlay_dir else None
    say_waiting(module_name)
    try:
        with stdout_to_stderr(), still_importing(module_name, started):
            module = importlib.import_module(module_name)
        classes = {name: read_class(module, name, ours) for name in names}
        live = Live(module_name, hook_active=hook_active(), classes=classes)
    except BaseException as exc:  # vLLM failing to import is what the user needs to see, not a traceback
        if isinstance(exc, KeyboardInterrupt):
            raise
        live = Live(module_name, error=f"{type(exc).__name__}: {exc}")
    seconds = round(time.perf_counter() - started, 3)
    print(f"doctor: --live: the import took {seconds:.1f} s", file=sys.stderr, flush=True)
    return Live(live.module, live.error, seconds, live.hook_active, live.classes)


# Measured (docs/doctor.md, "Cost"): 8-20 s warm; the first import after an install compiles torch's and
# vLLM's bytecode: 47-72 s in the tests' fresh venvs, 137-153 s in the audit of issue 45, on 2 busy cores,
# with up to 120 s without a line from vLLM.
WAIT_WORDS = "8-20 s warm; the first run after an install also compiles their bytecode: 1-3 minutes on 2 cores"
PROGRESS_S = 10.0  # a line at least this often while the import runs: a silent minute reads as a hang


def say_waiting(module_name: str) -> None:
    """What --live waits for, on stderr (stdout is the report's)."""
    print(f"doctor: --live: importing {module_name} as vLLM does (torch and vLLM: {WAIT_WORDS})...", file=sys.stderr,
          flush=True)  # fmt: skip


@contextlib.contextmanager
def still_importing(module_name: str, started: float, every: float = PROGRESS_S) -> Iterator[None]:
    """Say on stderr every `every` seconds that the import still runs, until it ends (a thread that waits)."""
    done = threading.Event()

    def tick() -> None:
        while not done.wait(every):
            print(f"doctor: --live: still importing {module_name} ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr, flush=True)  # fmt: skip

    ticker = threading.Thread(target=tick, name="doctor-live-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()


def hook_active() -> bool | None:
    """What the import hook decided in this process when vLLM imported the subtree (None: no hook).

    With VLLM_FUSED_MOE=off the .pth leaves only a stand-in finder: the hook is off, not absent. The
    stand-in says why it stands in (`why`: "off", or what broke the hook), having read the switch with
    the hook's own words; one from an overlay older than that does not say.
    """
    hooks = [f for f in sys.meta_path if type(f).__name__ == "OverlayFinder"]
    stand_ins = [f for f in sys.meta_path if type(f).__name__ == "OverlayStandIn"]
    if stand_ins and hasattr(stand_ins[0], "why"):
        switched_off = stand_ins[0].why == "off"
    else:
        switched_off = os.environ.get(MODE_ENV, "").strip().lower() in ("off", "0", "false", "no")
    return getattr(hooks[0], "active", None) if hooks else (False if switched_off else None)


def read_class(module: ModuleType, name: str, ours: str | None) -> LiveClass:
    """One class of the module vLLM imported: where it came from, and what it says."""
    import inspect

    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        return LiveClass(found=False)
    source = str(Path(inspect.getfile(cls)).resolve())
    return LiveClass(
        found=True,
        module=cls.__module__,
        file=source,
        output_is_reduced=reduced_as_built(cls),
        served_by_overlay=ours is not None and source.startswith(ours),
    )
