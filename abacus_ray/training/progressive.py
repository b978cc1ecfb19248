"""Progressive loss: the recurrent model's truncated-BPTT training objective.

The official objective: docs/official-code.md §4.13.

Per micro-batch the official code draws n ~ U{0..R-1} recurrences to run without gradient and
then k ~ U{1..min(R-n, M)} with gradient (M = `max_backprop`, default max(R//2, 1)), and scores
that one pass. With alpha < 1 a full pass (n = R-M, k = M) is mixed in:
loss = (1-alpha) L_full + alpha L_prog. With the paper's alpha = 1 the full pass is never
computed, so e.g. a 1x16 model back-propagates through at most 8 recurrences and reaches its full
depth only 17 % of the time. `throttle` is a constant loss multiplier (1 + min(R/4, M/2)) / M, not
a per-recurrence gradient division.

Draws come from a generator seeded by (run seed, micro-batch index, rank)
(`seeds.micro_batch_generator`), not from the global RNG, so a resumed run redraws exactly what it
would have drawn. By default each DDP rank draws its own depth and Abacus offset for its slice of a
global micro-batch, as the official code does (every rank seeded with seed + 10 x rank: eight
workers see eight offsets per step); `train.worker_draws=shared` keys every rank's generator on rank
0, so the whole global micro-batch shares one draw. Rank 0 draws the same either way, so a single
worker is unaffected.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

import torch

from abacus_ray.model.positions import OffsetDraw


class Call(NamedTuple):
    """One forward pass of a micro-batch: weight in the loss, no-grad recurrences n, grad
    recurrences k."""

    weight: float
    n: int
    k: int
    abacus_offset: int | None


def backprop_limit(recurrences: int, max_backprop: int | None = None) -> int:
    """M: how many recurrences at most carry gradient; max(R//2, 1) unless configured, never above
    R."""
    if recurrences < 1:
        raise ValueError(f"recurrences: must be >= 1, got {recurrences}")
    limit = max_backprop if max_backprop is not None else max(recurrences // 2, 1)
    if limit < 1:
        raise ValueError(f"max_backprop: must be >= 1, got {limit}")
    return min(limit, recurrences)


def throttle_factor(recurrences: int, limit: int) -> float:
    """(1 + min(R/4, M/2)) / M: 1.25 for 16x1, 1.5 for 8x2, 1.0 for 4x4, 0.625 for 1x16."""
    return (1 + min(recurrences / 4, limit / 2)) / limit


def _randint(low: int, high_inclusive: int, gen: torch.Generator) -> int:
    return int(torch.randint(low, high_inclusive + 1, (1,), generator=gen))


def draw_depth(recurrences: int, limit: int, gen: torch.Generator) -> tuple[int, int]:
    """(n, k): n ~ U{0..R-1} without gradient, then k ~ U{1..min(R-n, M)} with gradient."""
    n = _randint(0, recurrences - 1, gen)
    k = _randint(1, min(recurrences - n, limit), gen)
    return n, k


def plan_calls(recurrences: int, limit: int, alpha: float, gen: torch.Generator,
               offsets: OffsetDraw | None) -> list[Call]:
    """The forward passes of one micro-batch; `offsets` None means no Abacus offset to draw."""
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha: must be in [0, 1], got {alpha}")
    calls = []
    if alpha != 1:
        offset = None if offsets is None else offsets.draw(gen)
        calls.append(Call(1.0 - alpha, recurrences - limit, limit, offset))
    if alpha != 0:
        n, k = draw_depth(recurrences, limit, gen)
        offset = None if offsets is None else offsets.draw(gen)
        calls.append(Call(alpha, n, k, offset))
    return calls


def depth_distribution(recurrences: int, limit: int) -> dict[tuple[int, int], Fraction]:
    """Exact P(n, k) of `draw_depth` (the table in docs/official-code.md §4.13 follows from it)."""
    dist = {}
    for n in range(recurrences):
        top = min(recurrences - n, limit)
        for k in range(1, top + 1):
            dist[(n, k)] = Fraction(1, recurrences) * Fraction(1, top)
    return dist


def expected_depths(recurrences: int, limit: int, alpha: float = 1.0) -> tuple[float, float]:
    """(E[total recurrences], E[grad recurrences]) of one micro-batch under the progressive loss
    (plus the full pass when alpha < 1): what its FLOPs are counted at (MFU, the A4000-hour
    budget)."""
    dist = depth_distribution(recurrences, limit)
    total = sum(float(p) * (n + k) for (n, k), p in dist.items()) if alpha != 0 else 0.0
    grad = sum(float(p) * k for (n, k), p in dist.items()) if alpha != 0 else 0.0
    if alpha != 1:
        total, grad = total + recurrences, grad + limit
    return total, grad
