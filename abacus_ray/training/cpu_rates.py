"""How fast one CPU core trains and evaluates, by model width: what `abacus-ray plan` prices CPU
runs with (core-hours = model FLOPs / these rates).

`benchmarks/cpu_throughput.py` measures the rows and rewrites the block between the markers below:
model FLOPs per second of one core (torch at one thread, as a 1-CPU Ray worker runs) through the
real training loop (forward, progressive-loss backward, AdamW; FLOPs as the budget counts them,
`training.budget.sample_flops`) and through the evaluation engine's teacher-forced forward (FLOPs as
`plan` counts them, `evaluation.work.forward_flops`). A width between two measured rows takes the
log-log interpolation of its neighbours; outside them, the nearest row's rate (on a CPU the rate
grows with width until the matrices leave the cache, then flattens).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuRate:
    """One measured model: its width and what one core does with it."""

    model: str  # the row's model in words
    hidden: int
    params: int
    train_flops_per_s: float  # model FLOPs per second of one core, training
    eval_flops_per_s: float  # model FLOPs per second of one core, teacher-forced evaluation


# The measurement, tabled with its conditions: docs/performance.md, "Planning a reproduction".
# BEGIN MEASURED: written by benchmarks/cpu_throughput.py
MACHINE = (
    "AMD EPYC (AVX512), 2 cores, torch 2.13.0+cpu, 1 thread; "
    "2026-11-27, load average 2.1 before, 2.0 after"
)
RATES = (
    CpuRate("2x1 d128, 5-digit addition (tiny)", 128, 481_536, 5.58e10, 8.8e10),
    CpuRate("2x1 d256, 5-digit addition", 256, 1_847_808, 7.35e10, 1.18e11),
    CpuRate("4x1 d512, 20-digit addition", 512, 12_481_536, 1.29e11, 1.17e11),
)
# END MEASURED


def _interpolate(hidden: int, field: str) -> float:
    rows = sorted(RATES, key=lambda r: r.hidden)
    widths = [r.hidden for r in rows]
    at = bisect.bisect_left(widths, hidden)
    if at == 0:
        return getattr(rows[0], field)
    if at == len(rows):
        return getattr(rows[-1], field)
    lo, hi = rows[at - 1], rows[at]
    if hi.hidden == hidden:
        return getattr(hi, field)
    t = (math.log(hidden) - math.log(lo.hidden)) / (math.log(hi.hidden) - math.log(lo.hidden))
    return math.exp((1 - t) * math.log(getattr(lo, field)) + t * math.log(getattr(hi, field)))


def train_rate(hidden: int) -> float:
    """Training model FLOPs per second of one core for a model `hidden` wide."""
    return _interpolate(hidden, "train_flops_per_s")


def eval_rate(hidden: int) -> float:
    """Evaluation (forward) model FLOPs per second of one core for a model `hidden` wide."""
    return _interpolate(hidden, "eval_flops_per_s")
