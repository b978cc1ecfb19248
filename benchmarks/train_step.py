"""Throughput of the full training step (data, progressive-loss forward/backward, clip, AdamW).

Runs the real loop (`abacus_ray.training.train`) for `--warmup + --steps` optimiser steps with a
report after every step, and times the steps after the warm-up from the loop's own clock. One
optimiser step = one micro-batch here (batch ramp off, global batch = micro-batch) so numbers are
per micro-batch. Prints a table: samples/s, tokens/s (non-PAD), padded positions/s, ms/step and, on
a GPU with a known peak, MFU.

    python benchmarks/train_step.py                               # tiny on CPU (2 threads)
    python benchmarks/train_step.py --preset paper --device cuda \\
        --set model.layers=8 --set model.recurrences=2            # the paper's 8 x 2 on a GPU
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from abacus_ray import storage  # noqa: E402
from abacus_ray.config import bounds, preset  # noqa: E402
from abacus_ray.training.loop import train  # noqa: E402


def measure(preset_name: str, overrides: list[str], device: str, warmup: int, steps: int) -> dict:
    fixed = [f"train.max_steps={warmup + steps}", "train.budget_hours=1e6", "train.batch_ramp=0",
             "train.report_every_s=1e-9", "train.checkpoint_every_min=1e9"]
    micro = preset(preset_name, overrides + [f"train.global_batch={bounds.MAX_GLOBAL_BATCH}"]).train.micro_batch
    cfg = preset(preset_name, overrides + fixed + [f"train.global_batch={micro}"])
    reports: list[dict] = []
    train(cfg, device, report=reports.append)
    by_step = {r["step"]: r for r in reports if not r["final"]} | {reports[-1]["step"]: reports[-1]}
    start, end = by_step[warmup], by_step[warmup + steps]
    dt = end["elapsed_s"] - start["elapsed_s"]
    samples = end["samples"] - start["samples"]
    tokens = end["tokens"] - start["tokens"]
    mfus = [r["mfu"] for s, r in by_step.items() if s > warmup and "mfu" in r]
    return {"config": cfg, "samples_per_s": samples / dt, "tokens_per_s": tokens / dt,
            "ms_per_step": 1000 * dt / steps, "mfu": sum(mfus) / len(mfus) if mfus else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="tiny")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--micro-batches", default="", help="comma-separated micro-batch sizes to sweep (default: preset's)")
    p.add_argument("--profile", metavar="FILE", help="also profile one more run of the first micro-batch size "
                   "(torch.profiler, CPU and CUDA) and write its kernel table to FILE: where the step's time goes")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.micro_batches.split(",") if s.strip()] or [None]
    print(f"# {args.preset} {' '.join(args.overrides)} on {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if args.device.startswith("cuda") else f", {args.threads} threads"))
    print(f"{'micro_batch':>11} {'samples/s':>10} {'tokens/s':>10} {'ms/step':>9} {'MFU':>7}")
    for size in sizes:
        extra = [f"train.micro_batch={size}"] if size else []
        r = measure(args.preset, args.overrides + extra, args.device, args.warmup, args.steps)
        mfu = f"{100 * r['mfu']:6.1f}%" if r["mfu"] is not None else "      -"
        print(f"{r['config'].train.micro_batch:>11} {r['samples_per_s']:>10.1f} {r['tokens_per_s']:>10.0f} "
              f"{r['ms_per_step']:>9.1f} {mfu}")
    if args.profile:
        extra = [f"train.micro_batch={sizes[0]}"] if sizes[0] else []
        storage.write_text(storage.resolve(args.profile),
                           profile(args.preset, args.overrides + extra, args.device, args.warmup, args.steps))
        print(f"profile: {args.profile}")


def profile(preset_name: str, overrides: list[str], device: str, warmup: int, steps: int) -> str:
    """The kernel table of a whole measured run (warm-up included), heaviest device time first."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with torch_profile(activities=activities) as prof:
        measure(preset_name, overrides, device, warmup, steps)
    key = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=30, max_name_column_width=60)


if __name__ == "__main__":
    main()
