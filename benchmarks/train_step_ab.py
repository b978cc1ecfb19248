"""Training-step variants side by side in one process: samples/s ratios and kernel counts per step.

Each round runs every variant once through the real loop (`benchmarks/train_step.py`'s `measure`),
in turn, so a loaded machine slows them alike; the table gives each variant's median samples/s over
the rounds and the median and range over the rounds of its ratio to the first variant of the same
round (paired: load drifts between rounds on a shared VM). A second table counts the aten kernels of one micro-batch
(forward and backward, eager): the casts (`copy_`), `cat`s, LayerNorms, element-wise adds/muls and
matmuls the GPU profile pointed at, which a CPU can count but not time for a GPU.

Variants: `plain` is the eager step with autograd's own GLU / QKV-split backward (the code before
`model/fused.py`), `eager` the default eager step, `compiled` `train.compile=true` (inductor),
`bf16` autocast and `bf16-pure` the bf16 working model (both counted only: bf16 on a CPU is no
guide to a GPU's speed).

    python benchmarks/train_step_ab.py                          # tiny, 2 threads, plain/eager/compiled
    python benchmarks/train_step_ab.py --variants plain,eager --rounds 5 --steps 60
    python benchmarks/train_step_ab.py --cpu-time 60 --count ""  # paired CPU time, robust on a shared VM
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from abacus_ray.config import preset  # noqa: E402
from abacus_ray.model import ArithmeticTransformer, fused  # noqa: E402
from abacus_ray.model.precision import resolve_precision  # noqa: E402
from abacus_ray.tasks.stream import TrainStream  # noqa: E402
from abacus_ray.training.master import working_model  # noqa: E402
from abacus_ray.training.objective import answer_loss  # noqa: E402
from abacus_ray.training.progressive import backprop_limit  # noqa: E402
from benchmarks.train_step import measure  # noqa: E402

VARIANTS = {  # name: (overrides, use the one-buffer backward)
    "plain": (["train.compile=false", "train.precision=fp32"], False),
    "eager": (["train.compile=false", "train.precision=fp32"], True),
    "compiled": (["train.compile=true", "train.precision=fp32"], True),
    "bf16": (["train.compile=false", "train.precision=bf16"], True),
    "bf16-pure": (["train.compile=false", "train.precision=bf16-pure"], True),
}
KERNELS = {"cast (copy_)": ("aten::copy_",), "cat": ("aten::cat",), "layer_norm": ("aten::native_layer_norm",
           "aten::native_layer_norm_backward"), "add/mul": ("aten::add", "aten::add_", "aten::mul"),
           "mm": ("aten::mm", "aten::addmm", "aten::bmm")}


def run_variant(name: str, preset_name: str, overrides: list[str], warmup: int, steps: int) -> dict:
    extra, one_buffer = VARIANTS[name]
    real = fused._fusable
    if not one_buffer:
        fused._fusable = lambda x: False
    try:
        return measure(preset_name, overrides + extra, "cpu", warmup, steps)
    finally:
        fused._fusable = real


def count_kernels(name: str, preset_name: str, overrides: list[str]) -> Counter:
    """aten kernels of one micro-batch's forward (full depth, gradient through the progressive
    loss's limit M) and backward, grouped as in KERNELS; data, clipping and AdamW are left out."""
    extra, one_buffer = VARIANTS[name]
    cfg = preset(preset_name, overrides + extra)
    torch.manual_seed(0)
    model = ArithmeticTransformer.for_experiment(cfg).train()
    mode = resolve_precision(cfg.train.precision, "cpu")
    pair = working_model(model, mode.name)
    net = pair.working if pair is not None else model
    ids = TrainStream(cfg.task, cfg.seed).batch(0, cfg.train.micro_batch, 0, 1).input_ids
    depth = cfg.model.recurrences
    grad = backprop_limit(depth, cfg.train.max_backprop)
    real = fused._fusable
    if not one_buffer:
        fused._fusable = lambda x: False
    counts: Counter = Counter()
    try:
        for _ in range(2):  # the second is counted
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                with mode.autocast():
                    logits = net(ids, recurrences=depth, grad_recurrences=grad, abacus_offset=1)
                answer_loss(logits, ids, None, mask_before_equals=False).backward()
            net.zero_grad(set_to_none=True)
    finally:
        fused._fusable = real
    for event in prof.key_averages():
        for group, names in KERNELS.items():
            if event.key in names:
                counts[group] += event.count
    return counts


def alternate_cpu_time(preset_name: str, overrides: list[str], iterations: int) -> dict[str, list[float]]:
    """Thread CPU seconds of one micro-batch's forward + backward (fp32, one torch thread), the
    variants `plain`, `eager` and `compiled` taking turns on one model and batch: paired, and
    insensitive to the CPU time other machines steal from a shared VM."""
    cfg = preset(preset_name, overrides + ["train.precision=fp32"])
    torch.manual_seed(0)
    model = ArithmeticTransformer.for_experiment(cfg).train()
    ids = TrainStream(cfg.task, cfg.seed).batch(0, cfg.train.micro_batch, 0, 1).input_ids
    depth, grad = cfg.model.recurrences, backprop_limit(cfg.model.recurrences, cfg.train.max_backprop)
    real = fused._fusable
    times: dict[str, list[float]] = {"plain": [], "eager": [], "compiled": []}

    def step(variant: str) -> float:
        fused._fusable = real if variant != "plain" else (lambda x: False)
        if variant == "compiled":
            model.compile_block()
        start = time.thread_time()
        answer_loss(model(ids, recurrences=depth, grad_recurrences=grad, abacus_offset=1), ids, None,
                    mask_before_equals=False).backward()
        spent = time.thread_time() - start
        model.zero_grad(set_to_none=True)
        model.drop_compiled_block()
        return spent

    try:
        for _ in range(3):  # warm-up, compilation included
            for v in times:
                step(v)
        for _ in range(iterations):
            for v in times:
                times[v].append(step(v))
    finally:
        fused._fusable = real
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="tiny")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--variants", default="plain,eager,compiled", help=f"timed, in order ({', '.join(VARIANTS)})")
    p.add_argument("--count", default="plain,eager,bf16,bf16-pure", help="variants whose kernels are counted")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--cpu-time", type=int, default=0, metavar="N",
                   help="instead of the loop's samples/s: N alternations of plain/eager/compiled, thread CPU time")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.cpu_time:
        torch.set_num_threads(1)
        times = alternate_cpu_time(args.preset, args.overrides, args.cpu_time)
        print(f"# {args.preset} {' '.join(args.overrides)}: forward + backward of one micro-batch, fp32, 1 thread, "
              f"thread CPU time, {args.cpu_time} alternations, torch {torch.__version__}")
        print(f"{'variant':<10} {'ms (median)':>12} {'ratio to plain (median of pairs)':>33} {'range':>11}")
        for v, ts in times.items():
            ratios = [b / a for a, b in zip(ts, times["plain"], strict=True)]  # speed-up: plain time / time
            print(f"{v:<10} {1e3 * statistics.median(ts):>12.2f} {statistics.median(ratios):>33.2f} "
                  f"{min(ratios):>5.2f}-{max(ratios):<5.2f}")
        return
    timed = [v for v in args.variants.split(",") if v]
    rates: dict[str, list[float]] = {v: [] for v in timed}
    for _ in range(args.rounds):
        for v in timed:
            rates[v].append(run_variant(v, args.preset, args.overrides, args.warmup, args.steps)["samples_per_s"])
    print(f"# {args.preset} {' '.join(args.overrides)} on cpu, {args.threads} threads, torch {torch.__version__}, "
          f"{args.rounds} rounds of {args.steps} steps after {args.warmup}")
    print(f"{'variant':<10} {'samples/s (median)':>19} {'range':>17} {'ratio (median of rounds)':>25} {'range':>11}")
    for v in timed:
        ratios = [a / b for a, b in zip(rates[v], rates[timed[0]], strict=True)]  # paired within a round
        print(f"{v:<10} {statistics.median(rates[v]):>19.1f} {min(rates[v]):>8.1f}-{max(rates[v]):<8.1f} "
              f"{statistics.median(ratios):>25.2f} {min(ratios):>5.2f}-{max(ratios):<5.2f}")
    counted = [v for v in args.count.split(",") if v]
    if counted:
        print(f"\naten kernels of one micro-batch's forward + backward (eager)\n{'variant':<10} "
              + " ".join(f"{g:>13}" for g in KERNELS))
        for v in counted:
            c = count_kernels(v, args.preset, args.overrides)
            print(f"{v:<10} " + " ".join(f"{c[g]:>13}" for g in KERNELS))


if __name__ == "__main__":
    main()
