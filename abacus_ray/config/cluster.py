"""`ClusterConfig`: how a trial is placed on a Ray cluster (read only by `abacus_ray.cluster`)."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_ray.config.dicts import check, check_choice

TRAINERS = ("torch", "function")


@dataclass(frozen=True)
class ClusterConfig:
    workers: int = 1  # Ray Train workers per trial (DDP when > 1)
    use_gpu: bool = False
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 1.0
    # torch: every trial is a Ray Train TorchTrainer (DDP, worker restarts). function: the loop runs in
    # the Tune trial process itself, one worker, ~5x less start-up (smoke tests, many tiny trials).
    trainer: str = "torch"

    def __post_init__(self) -> None:
        check(self.workers >= 1, "cluster.workers", f"must be >= 1, got {self.workers}")
        check(self.cpus_per_worker > 0, "cluster.cpus_per_worker", f"must be > 0, got {self.cpus_per_worker}")
        check(self.gpus_per_worker > 0, "cluster.gpus_per_worker", f"must be > 0, got {self.gpus_per_worker}")
        check_choice(self.trainer, "cluster.trainer", TRAINERS)
        check(self.trainer == "torch" or self.workers == 1, "cluster.trainer",
              f"'function' trains in one process; cluster.workers={self.workers} needs 'torch'")
