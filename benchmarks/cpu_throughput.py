"""Model FLOPs per second of one CPU core, training and evaluating, per model width: the table
`abacus-ray plan` prices CPU runs with (`abacus_ray/training/cpu_rates.py`).

For each row's model, at one torch thread (what a 1-CPU Ray worker gets): the real training loop
(`abacus_ray.training.train`, one micro-batch per optimiser step) for a few warm-up steps and then
timed steps, FLOPs as the budget counts them (`sample_flops` x samples); and the evaluation engine
scoring cells of `tiny-addition` (`evaluation.runner.score_cells`, teacher-forced), FLOPs as `plan`
counts them (`evaluation.work.forward_flops`). Prints the table, the machine and its load average
before and after (other work on the machine makes the rates pessimistic), and writes the table
into `cpu_rates.py` unless `--no-write`. About 40 s on an idle core.

    python benchmarks/cpu_throughput.py [--no-write]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import torch  # noqa: E402
from train_step import measure  # noqa: E402

from abacus_ray import storage  # noqa: E402
from abacus_ray.config import EvalConfig  # noqa: E402
from abacus_ray.evaluation.grids import resolve_grid  # noqa: E402
from abacus_ray.evaluation.runner import score_cells  # noqa: E402
from abacus_ray.evaluation.work import cells_for, forward_flops, token_flops  # noqa: E402
from abacus_ray.model import ArithmeticTransformer  # noqa: E402
from abacus_ray.model.checkpoint import Checkpoint  # noqa: E402
from abacus_ray.training.budget import sample_flops  # noqa: E402
from abacus_ray.training.cpu_rates import CpuRate  # noqa: E402

RATES_FILE = REPO / "abacus_ray" / "training" / "cpu_rates.py"
# (words, overrides on `tiny`, micro-batch, timed training steps): the tiny model, then wider ones
ROWS = (
    ("2x1 d128, 5-digit addition (tiny)", [], 64, 30),
    ("2x1 d256, 5-digit addition", ["model.hidden=256", "model.intermediate=1024"], 32, 12),
    (
        "4x1 d512, 20-digit addition",
        [
            "model.layers=4",
            "model.hidden=512",
            "model.intermediate=2048",
            "model.heads=8",
            "task.train_max_len=20",
            "model.max_k=60",
        ],
        8,
        6,
    ),
)
WARMUP = 3
EVAL_CELLS = 24  # the first cells of tiny-addition (1x1 .. 2x12), 20 problems each


def train_row(overrides: list[str], micro: int, steps: int) -> tuple[object, float]:
    """(The row's config, training model FLOPs per second of one core)."""
    r = measure("tiny", [*overrides, f"train.micro_batch={micro}"], "cpu", WARMUP, steps)
    cfg = r["config"]
    return cfg, r["samples_per_s"] * sample_flops(cfg)


def eval_row(cfg) -> float:
    """Evaluation model FLOPs per second of one core: a random model scoring cells, once warm."""
    torch.manual_seed(0)
    model = ArithmeticTransformer.for_experiment(cfg).eval()
    ckpt = Checkpoint(Path("random"), model, cfg, "random", {}, torch.device("cpu"))
    eval_cfg = EvalConfig(per_cell=20)
    cells = cells_for(cfg, [resolve_grid(grid="tiny-addition")])[:EVAL_CELLS]
    score_cells(ckpt, cells[:2], eval_cfg)  # warm-up
    t0 = time.perf_counter()
    score_cells(ckpt, cells, eval_cfg)
    seconds = time.perf_counter() - t0
    flops = forward_flops(cells, eval_cfg.per_cell, token_flops(cfg, cfg.model.test_recurrences))
    return flops / seconds


def machine(load_before: float, load_after: float) -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    return (
        f"{cpu} ({torch.backends.cpu.get_cpu_capability()}), {os.cpu_count()} cores, torch "
        f"{torch.__version__}, 1 thread; {datetime.date.today()}, load average "
        f"{load_before:.1f} before, {load_after:.1f} after"
    )


def _g(x: float) -> str:
    return f"{x:.3g}".replace("e+", "e")


def block(rates: list[CpuRate], where: str) -> str:
    head, _, tail = where.partition("; ")
    lines = [
        "MACHINE = (",
        f"    {json.dumps(head + '; ')}",
        f"    {json.dumps(tail)}",
        ")",
        "RATES = (",
    ]
    lines += [
        f"    CpuRate({json.dumps(r.model)}, {r.hidden}, {r.params:_}, {_g(r.train_flops_per_s)}, "
        f"{_g(r.eval_flops_per_s)}),"
        for r in rates
    ]
    return "\n".join([*lines, ")"])


def write(rates: list[CpuRate], where: str) -> None:
    text = storage.read_text(storage.on_disk(RATES_FILE))
    new = re.sub(
        r"(# BEGIN MEASURED[^\n]*\n).*?(\n# END MEASURED)",
        lambda m: m.group(1) + block(rates, where) + m.group(2),
        text,
        flags=re.S,
    )
    storage.write_text(storage.on_disk(RATES_FILE), new)  # atomically


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--no-write", action="store_true", help="print the table only")
    args = p.parse_args()
    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    rates = []
    print(f"{'model':<36} {'params':>10} {'train GFLOP/s/core':>19} {'eval GFLOP/s/core':>18}")
    for words, overrides, micro, steps in ROWS:
        cfg, train = train_row(overrides, micro, steps)
        ev = eval_row(cfg)
        params = ArithmeticTransformer.for_experiment(cfg).num_params()
        rates.append(CpuRate(words, cfg.model.hidden, params, train, ev))
        print(f"{words:<36} {params:>10,} {train / 1e9:>19.2f} {ev / 1e9:>18.2f}", flush=True)
    where = machine(load_before, os.getloadavg()[0])
    print(f"# {where}; {time.perf_counter() - t0:.0f} s")
    if not args.no_write:
        write(rates, where)
        print(f"# written to {RATES_FILE.relative_to(REPO)}")


if __name__ == "__main__":
    main()
