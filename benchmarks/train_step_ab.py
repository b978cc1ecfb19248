"""Training-step variants side by side in one process: samples/s ratios and kernel counts per step.

Each round runs every variant once through the real loop (`benchmarks/train_step.py`'s `measure`),
in turn, so a loaded machine slows them alike; the table gives each variant's median samples/s over
the rounds and its ratio to the first. A second table counts the aten kernels of one micro-batch
(forward and backward, eager): the casts (`copy_`), `cat`s, LayerNorms, element-wise adds/muls and
matmuls the GPU profile pointed at, which a CPU can count but not time for a GPU.

Variants: `plain` is the eager step with autograd's own GLU / QKV-split backward (the code before
`model/fused.py`), `eager` the default eager step, `compiled` `train.compile=true` (inductor),
`bf16` autocast and `bf16-pure` the bf16 working model (both counted only: bf16 on a CPU is no
guide to a GPU's speed).

    python benchmarks/train_step_ab.py                          # tiny, 2 threads, plain/eager/compiled
    python benchmarks/train_step_ab.py --variants plain,eager --rounds 5 --steps 60
"""

from __future__ import annotations

import argparse
import statistics
import sys
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
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    timed = [v for v in args.variants.split(",") if v]
    rates: dict[str, list[float]] = {v: [] for v in timed}
    for _ in range(args.rounds):
        for v in timed:
            rates[v].append(run_variant(v, args.preset, args.overrides, args.warmup, args.steps)["samples_per_s"])
    print(f"# {args.preset} {' '.join(args.overrides)} on cpu, {args.threads} threads, torch {torch.__version__}, "
          f"{args.rounds} rounds of {args.steps} steps after {args.warmup}")
    base = statistics.median(rates[timed[0]])
    print(f"{'variant':<10} {'samples/s (median)':>19} {'range':>17} {'ratio':>6}")
    for v in timed:
        med = statistics.median(rates[v])
        print(f"{v:<10} {med:>19.1f} {min(rates[v]):>8.1f}-{max(rates[v]):<8.1f} {med / base:>6.2f}")
    counted = [v for v in args.count.split(",") if v]
    if counted:
        print(f"\naten kernels of one micro-batch's forward + backward (eager)\n{'variant':<10} "
              + " ".join(f"{g:>13}" for g in KERNELS))
        for v in counted:
            c = count_kernels(v, args.preset, args.overrides)
            print(f"{v:<10} " + " ".join(f"{c[g]:>13}" for g in KERNELS))


if __name__ == "__main__":
    main()
