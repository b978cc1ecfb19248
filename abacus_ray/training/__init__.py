"""training layer: budgeted loop, progressive loss, optimiser + schedules.

`train` runs one model's training (resumable, DDP-aware); checkpoints live in
`abacus_ray.model.checkpoint`.
"""

from abacus_ray.training.loop import TrainResult, train

__all__ = ["TrainResult", "train"]
