"""Combine latency per token count, beside the TP all-reduce that patch 0001 removes.

Before patch 0001 vLLM all-reduced the (already reduced) combine output over the
TP group again; that all-reduce is pure waste (and wrong). This measures, in the
same iterations, FlashInfer's combine and a NCCL all-reduce of its output.

  python benchmarks/kernel_combine.py                        # one GPU
  torchrun --nproc-per-node N benchmarks/kernel_combine.py   # EP = TP = N (multi-GPU issue)

On one process the all-reduce column is n/a: NCCL over a single rank is a local
no-op and cannot show the cost the fix removes. Not a test; prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# A script, never imported: it reaches the kernel scripts and the checkout's `release` (which
# kernel_probe reads VERIFIED.toml with) the way pytest's pythonpath would.
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "kernel"), str(ROOT)]

import kernel_probe  # noqa: E402  (found through the sys.path set just above)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 7, 128, 1024, 4096])
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    reason = kernel_probe.environment_reason()
    if reason is not None:
        print(f"benchmark not run: {reason}")
        return 0

    import torch
    import torch.distributed as dist

    import kernel_contract as kc

    ctx = kc.ep_context()
    max_tokens = max(args.tokens)
    allreduce = None
    ar_note = ""
    if ctx.world_size == 1:
        ar_note = (
            "n/a: one rank; NCCL all-reduce over a single GPU is a local no-op, "
            "so the removed all-reduce is measured by the multi-GPU issue (torchrun)"
        )
    elif ctx.world_size > torch.cuda.device_count():
        ar_note = f"n/a: {ctx.world_size} ranks share {torch.cuda.device_count()} GPU(s); NCCL needs one GPU per rank"
    else:
        nccl = dist.new_group(backend="nccl")

        def allreduce(out: torch.Tensor) -> None:  # what vLLM did after combine before the fix
            dist.all_reduce(out, group=nccl)

    rows: list[dict[str, object]] = []
    for name in kc.BACKENDS:
        ok, why = kc.try_backend(ctx, name)
        if not ok:
            rows.append({"backend": name, "error": why})
            continue
        for t in args.tokens:
            combine_ms, ar_ms = kc.time_combine(
                name, t, args.top_k, args.hidden, args.iters, max_tokens=max_tokens, after=allreduce
            )
            rows.append(
                {
                    "backend": name,
                    "ep_size": ctx.world_size,
                    "tokens": t,
                    "top_k": args.top_k,
                    "hidden": args.hidden,
                    "combine_us": round(combine_ms * 1e3, 2),
                    "allreduce_us": None if ar_ms is None else round(ar_ms * 1e3, 2),
                }
            )

    if ctx.rank == 0:
        dev = torch.cuda.get_device_name(ctx.device)
        print(
            f"device {dev}, EP {ctx.world_size}, bf16, top_k {args.top_k}, hidden {args.hidden}, "
            f"median of {args.iters} iterations (CUDA events, combine only; dispatch untimed)"
        )
        print(f"| {'backend':<28} | {'tokens':>6} | {'combine us':>10} | {'TP all-reduce us':>16} |")
        print(f"|{'-' * 30}|{'-' * 8}|{'-' * 12}|{'-' * 18}|")
        for r in rows:
            if "error" in r:
                print(f"| {r['backend']:<28} | cannot run: {r['error']}")
                continue
            ar = "n/a" if r["allreduce_us"] is None else f"{r['allreduce_us']:.2f}"
            print(f"| {r['backend']:<28} | {r['tokens']:>6} | {r['combine_us']:>10.2f} | {ar:>16} |")
        if ar_note:
            print(f"TP all-reduce: {ar_note}")
        if args.json:
            args.json.write_text(json.dumps({"rows": rows, "allreduce_note": ar_note}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
