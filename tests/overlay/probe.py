"""Run by a fresh venv's python: which classes does vLLM resolve, here and in its workers?

Prints one JSON object on the last line of stdout. Not a test module (no test_ prefix):
tests/overlay/test_activation.py runs it as a real process.
"""

from __future__ import annotations

import inspect
import json
import os
import sys

CLASSES = ("FlashInferNVLinkTwoSidedPrepareAndFinalize", "FlashInferNVLinkOneSidedPrepareAndFinalize")


def resolve() -> dict:
    state = {
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
        cls = getattr(all2all_utils, name)
        state[name] = {
            "file": inspect.getfile(cls),
            "module": cls.__module__,
            # A plain method returning a constant; no __init__ (it needs a GPU all2all manager).
            "output_is_reduced": cls.output_is_reduced(object.__new__(cls)),
        }
    return state


def _child(queue) -> None:
    try:
        queue.put(resolve())
    except BaseException as exc:
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def in_worker(method: str) -> dict:
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


if __name__ == "__main__":
    report: dict = {}
    try:
        report["main"] = resolve()
        for method in sys.argv[1:]:
            report[method] = in_worker(method)
    except BaseException as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(report))
