"""What `bf16-pure` data parallel pays for its gradient all-reduce, which does not overlap the backward.

Under `train.precision=bf16-pure` DDP wraps nothing: the fp32 master gradients are averaged after
the backward pass in one flat all-reduce (`training/distributed.py:average_gradients`), so its time
adds to every optimiser step instead of hiding behind the backward, and it sends fp32 (twice the
bytes of a bf16 gradient). This runs the real loop on 2 ranks (gloo over a FileStore, one torch
thread each), times every call of that all-reduce on rank 0 and prints its share of the step time,
for the tiny model and wider ones. On a CPU both the compute and gloo's copies are slow, so the share
is a ratio of this machine, not a GPU's (where NCCL is faster and so is the backward); it bounds
what overlapping could save here.

    python benchmarks/bf16_allreduce.py                       # tiny, 2 x 2 and 4 x 1 at d=256
    python benchmarks/bf16_allreduce.py --steps 40 --widths 128,512
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from abacus_ray.config import preset  # noqa: E402


def _rank(rank: int, world: int, store: str, overrides: list[str], out: mp.Queue) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank,
                            world_size=world)
    import abacus_ray.training.loop as loop  # after the group: the loop reads its world size

    spent, calls = [0.0], [0]
    reduce = loop.average_gradients

    def timed(*args, **kwargs):
        start = time.perf_counter()
        reduce(*args, **kwargs)
        spent[0] += time.perf_counter() - start
        calls[0] += 1

    loop.average_gradients = timed
    reports: list[dict] = []
    cfg = preset("tiny", overrides)
    loop.train(cfg, "cpu", process_group=dist.group.WORLD, report=reports.append)
    dist.destroy_process_group()
    if rank == 0:
        out.put({"seconds": reports[-1]["elapsed_s"], "allreduce_s": spent[0], "calls": calls[0]})


def measure(overrides: list[str], world: int = 2) -> dict:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_rank, args=(r, world, os.path.join(tmp, "store"), overrides,
                                                  out)) for r in range(world)]
        for p in procs:
            p.start()
        result = out.get(timeout=1800)
        for p in procs:
            p.join()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30, help="optimiser steps per model")
    ap.add_argument("--widths", default="128,256", help="hidden sizes (comma list)")
    args = ap.parse_args(argv)
    print(f"{'model':<22} {'steps':>5} {'step ms':>8} {'all-reduce ms':>14} {'share':>6}")
    for width in [int(w) for w in args.widths.split(",")]:
        for layers, recurrences in ((2, 2), (4, 1)):
            overrides = [f"model.hidden={width}", f"model.intermediate={2 * width}",
                         f"model.layers={layers}", f"model.recurrences={recurrences}",
                         "train.precision=bf16-pure", f"train.max_steps={args.steps}",
                         "train.budget_hours=null", "train.batch_ramp=0",
                         "train.global_batch=64", "train.micro_batch=32",
                         "train.checkpoint_every_min=1e9"]
            r = measure(overrides)
            step_ms = 1e3 * r["seconds"] / args.steps
            reduce_ms = 1e3 * r["allreduce_s"] / max(r["calls"], 1)
            name = f"{layers} x {recurrences}, d={width}"
            print(f"{name:<22} {args.steps:>5} {step_ms:>8.1f} {reduce_ms:>14.2f} "
                  f"{100 * r['allreduce_s'] / r['seconds']:>5.1f}%", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
