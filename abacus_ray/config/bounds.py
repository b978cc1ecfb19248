"""Upper bounds on every count, size and length a config holds, checked when the config is built.

A config comes from `--set`, a sweep file, a checkpoint's config.json or Tune's param space; each
value is bounded here, so a typo such as `model.layers=1000000000` is one line naming the value and
its bound before anything is built, allocated or trained (docs/design.md, "Config"). The bounds are
far above the paper's settings (Table 5: 16 layers, hidden 1024, 100 problems per cell, a 512-row
table) and below what would hang or exhaust memory before any device-specific check could run;
whether a model and its batch fit the device they run on is `model/memory.py`'s check.
"""

from __future__ import annotations

from abacus_ray.config.dicts import check

# digits of an operand (training n, validation lengths); the grids' bound (evaluation/grids.py)
MAX_LENGTH = 100_000
MAX_ARRAY = 10_000  # numbers in a sorting problem
# distinct layers in the recurrent block (16x the paper's deepest; built layer by layer)
MAX_LAYERS = 256
MAX_RECURRENCES = 1_024  # applications of the block, in training or at test time
MAX_HIDDEN = 65_536
MAX_INTERMEDIATE = 262_144
MAX_HEADS = 1_024
MAX_TABLE = 1_000_000  # rows of the Abacus / learned position table
MAX_POSITIONS = 10_000_000  # randomised FIRE positions
MAX_MICRO_BATCH = 1 << 20
MAX_GLOBAL_BATCH = 1 << 24
MAX_PER_CELL = 100_000  # problems per evaluation cell (the paper: 100)
MAX_TOKEN_BUDGET = 1 << 26  # tokens per evaluation batch
MAX_VALIDATION_LENGTHS = 1_000
MAX_WORKERS = 4_096  # Ray Train workers per trial
MAX_WORKER_CPUS = 4_096.0
MAX_WORKER_GPUS = 64.0
MAX_BUDGET_HOURS = 1e6  # A4000-hours or device-hours of one trial (the paper's: 24 A4000-hours)
MAX_STEPS = 10**12  # optimiser steps of one trial
MAX_SAMPLES = 10**15  # training samples of one trial (the paper's budget: about 5.6e7)


def check_at_most(value: int | float, bound: int | float, key: str) -> None:
    """Refuse `value` above `bound`, naming the key, the value and the bound."""
    check(value <= bound, key, f"{value:,} is beyond the bound of {bound:,}")
