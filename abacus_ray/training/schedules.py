"""The paper's budget-keyed schedules: the trapezoid learning rate and the batch-size ramp.

Both are functions of the budget fraction f in [0, 1] only (docs/official-code.md §6.3, §6.5). The
official code turns f into an integer "fake step" out of 12 million and applies its formulas to
that; we do the same, in the same floating-point order, so the quantised values match the official
code's worked examples (e.g. micro-batch 512: f = 0.3 gives 4096, not 4608). Because they depend on
f alone, a resumed run continues exactly the schedule it left.
"""

from __future__ import annotations

import math

FAKE_STEPS = 12_000_000  # `train.steps` of the official config: the resolution of the schedules


def fake_step(fraction: float) -> int:
    """floor(f * 12e6), clamped at 0: the official scheduler's notion of progress."""
    if not math.isfinite(fraction):
        raise ValueError(f"fraction: must be finite, got {fraction}")
    return max(0, math.floor(fraction * FAKE_STEPS))


def lr_multiplier(fraction: float, warmup: float = 0.1, cooldown: float = 0.1, *,
                  first_call: bool = False) -> float:
    """Trapezoid: linear warm-up over `warmup` of the budget, plateau at 1, linear cool-down to 0.

    `first_call` forces fake step 0 (the official scheduler's very first call), so the first
    optimiser step of a run always uses lr 0 when there is a warm-up.
    """
    if not 0 <= warmup <= 1 or not 0 <= cooldown <= 1 or warmup + cooldown > 1:
        raise ValueError(f"warmup: warmup {warmup} + cooldown {cooldown} must lie in [0, 1]")
    fake = 0 if first_call else fake_step(fraction)
    warm_steps = warmup * FAKE_STEPS
    cool_steps = cooldown * FAKE_STEPS
    if fake < warm_steps:
        return fake / warm_steps
    if cool_steps > 0 and fake > FAKE_STEPS - cool_steps:
        return max(0.0, (FAKE_STEPS - fake) / cool_steps)
    return 1.0


def ramped_batch_size(fraction: float, global_batch: int, micro_batch_eff: int,
                      ramp: float = 0.6) -> int:
    """Batch size after an optimiser step: one effective micro-batch growing to `global_batch`.

    `micro_batch_eff` is the micro-batch times the world size. The ramp is linear over the first
    `ramp` of the budget, quantised to multiples of `micro_batch_eff` (docs/official-code.md §6.5):
    min(mbs * (floor(fake * (G / (12e6 * ramp)) / mbs) + 1), G). `ramp = 0` disables it (always G).
    """
    if micro_batch_eff < 1:
        raise ValueError(f"micro_batch_eff: must be >= 1, got {micro_batch_eff}")
    if global_batch < 1:
        raise ValueError(f"global_batch: must be >= 1, got {global_batch}")
    if not 0 <= ramp <= 1:
        raise ValueError(f"ramp: must be in [0, 1], got {ramp}")
    if ramp == 0:
        return global_batch
    fake = fake_step(fraction)
    grown = fake * (global_batch / (FAKE_STEPS * ramp))
    return min(micro_batch_eff * (math.floor(grown / micro_batch_eff) + 1), global_batch)


def accumulation_steps(batch_size: int, micro_batch_eff: int) -> int:
    """Micro-batches per optimiser step: the official engine steps once accumulated samples reach
    the batch size, so a batch that is not a multiple of the micro-batch rounds up."""
    if batch_size < 1 or micro_batch_eff < 1:
        raise ValueError(f"batch_size: {batch_size} and micro_batch_eff {micro_batch_eff} "
                         "must be >= 1")
    return -(-batch_size // micro_batch_eff)
