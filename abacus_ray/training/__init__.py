"""training layer: budgeted loop, progressive loss, optimiser + schedules, checkpoints.

`train`, `TrainResult`, `save_checkpoint`, `load_checkpoint` and `Checkpoint` are imported lazily:
`abacus_ray.config` imports `training.config` while it is itself being imported, so this package
must not import `abacus_ray.config` eagerly.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "train": "abacus_ray.training.loop",
    "TrainResult": "abacus_ray.training.loop",
    "save_checkpoint": "abacus_ray.training.checkpoint",
    "load_checkpoint": "abacus_ray.training.checkpoint",
    "latest_checkpoint": "abacus_ray.training.checkpoint",
    "Checkpoint": "abacus_ray.training.checkpoint",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'abacus_ray.training' has no attribute {name!r}")
