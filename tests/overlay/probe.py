"""Run by a fresh venv's python: which classes does vLLM resolve, here and in its workers?

Prints one JSON object on the last line of stdout. Not a test module (no test_ prefix):
tests/overlay/test_activation.py and test_pick_wheel.py run it as a real process.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from typing import Any

CLASSES = ("FlashInferNVLinkTwoSidedPrepareAndFinalize", "FlashInferNVLinkOneSidedPrepareAndFinalize")


def resolve() -> dict[str, Any]:
    state: dict[str, Any] = {
        # Evidence that the hook is in place before vLLM is, with no vLLM plugin call involved.
        "vllm_imported_before": "vllm" in sys.modules,
        "hook_installed": any(type(f).__name__ == "OverlayFinder" for f in sys.meta_path),
    }
    import vllm
    import vllm.plugins

    # The module vLLM resolves the NVLink prepare/finalize classes from (maybe_make_prepare_finalize).
    from vllm.model_executor.layers.fused_moe import all2all_utils

    state["plugins_loaded"] = vllm.plugins.plugins_loaded
    state["vllm_version"] = vllm.__version__
    state["pid"] = os.getpid()
    for name in CLASSES:
        cls = getattr(all2all_utils, name, None)
        if cls is None:  # an older release line: its classes are reported by overlaid()
            continue
        state[name] = {
            "file": inspect.getfile(cls),
            "module": cls.__module__,
            # A plain method returning a constant; no __init__ (it needs a GPU all2all manager).
            "output_is_reduced": cls.output_is_reduced(object.__new__(cls)),
        }
    return state


def _reduced(cls: Any) -> bool | None:
    """cls.output_is_reduced() on an instance configured as vLLM's factory builds it for DP > 1
    (`use_dp` True where the constructor takes it), without running __init__, which needs
    vLLM's distributed groups. None if the method needs more than that."""
    if inspect.isabstract(cls):  # a base vLLM never builds (FlashInferCutlassMoEPrepareAndFinalize)
        return None
    instance: Any = object.__new__(cls)
    if "use_dp" in inspect.signature(cls.__init__).parameters:
        instance.use_dp = True
    try:
        return bool(cls.output_is_reduced(instance))
    except Exception:  # the method reads state only __init__ sets
        return None


def overlaid() -> dict[str, Any]:
    """Every prepare/finalize class of every module our build changes, as ours and as vLLM's own.

    The modules come from the wheel's build info (`_meta.targets()`: what this overlay serves
    under vLLM's names); a module counts when our file differs from the one vLLM installed.
    Ours is imported by vLLM's name (so through the hook); vLLM's own file is loaded beside it
    under a private name.
    """
    import importlib
    import importlib.util
    from pathlib import Path

    import vllm

    from vllm_fused_moe import _meta

    ours_root = Path(_meta.HERE)
    vllm_root = Path(vllm.__file__).parent.parent
    modules: list[tuple[str, Path]] = []
    for name, path in _meta.targets().items():
        if path.endswith("/"):
            files = sorted(f for f in (ours_root / path).glob("*.py") if f.stem != "__init__")
            modules += [(f"{name}.{f.stem}", f) for f in files]
        else:
            modules.append((name, ours_root / path))
    found: dict[str, Any] = {}
    for name, our_file in modules:
        their_file = vllm_root / (name.replace(".", "/") + ".py")
        if their_file.read_bytes() == our_file.read_bytes():
            continue
        ours = importlib.import_module(name)
        spec = importlib.util.spec_from_file_location("_pristine_" + name.replace(".", "_"), their_file)
        assert spec is not None and spec.loader is not None
        theirs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(theirs)
        for class_name, cls in vars(ours).items():
            if (
                isinstance(cls, type)
                and cls.__module__ == name
                and callable(getattr(cls, "output_is_reduced", None))
                and not inspect.isabstract(cls)  # never built; its subclasses are reported
            ):
                found[class_name] = {
                    "module": name,
                    "file": inspect.getfile(cls),
                    "ours": _reduced(cls),
                    "pristine": _reduced(getattr(theirs, class_name)),
                }
    return found


def _child(queue: Any) -> None:
    try:
        queue.put(resolve())
    except BaseException as exc:
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def in_worker(method: str) -> dict[str, Any]:
    # The call vLLM's multiproc executor uses to start its workers.
    os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = method
    from vllm.utils.system_utils import get_mp_context

    context = get_mp_context()
    queue = context.Queue()
    process = context.Process(target=_child, args=(queue,))
    process.start()
    result = queue.get(timeout=240)
    process.join(timeout=60)
    result["start_method"] = context.get_start_method()
    return result


def doctor_live() -> dict[str, Any]:
    """`vllm-fused-moe doctor --live --json` in this process, after resolve() and overlaid(): its exit
    code and report. The doctor imports the line's module as vLLM does; here vLLM has already imported
    it, through the same hook, so the doctor reads the very classes the probe read (one vLLM import
    for both, not one per process)."""
    import contextlib
    import io

    from vllm_fused_moe import doctor

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = doctor.main(["--live", "--json"])
    return {"returncode": code, "report": json.loads(printed.getvalue())}


if __name__ == "__main__":
    report: dict[str, Any] = {}
    # Arguments: the start methods of the workers to resolve in ("spawn", "fork"), and `--doctor-live`.
    methods = [arg for arg in sys.argv[1:] if arg != "--doctor-live"]
    try:
        report["main"] = resolve()
        try:  # after resolve(), which records whether vLLM was imported before it
            report["overlaid"] = overlaid()
        except Exception as exc:
            report["overlaid"] = {"error": f"{type(exc).__name__}: {exc}"}
        if "--doctor-live" in sys.argv[1:]:
            report["doctor_live"] = doctor_live()
        for method in methods:
            report[method] = in_worker(method)
    except BaseException as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(report))
