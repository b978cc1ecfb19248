"""`ClusterConfig`: how a trial is placed on a Ray cluster (read only by `abacus_ray.cluster`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from abacus_ray.config import bounds
from abacus_ray.config.dicts import check, check_choice

TRAINERS = ("torch", "function")
PLACEMENTS = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")  # Ray's placement-group strategies
# CPUs a `torch` trial's Tune driver holds beside its workers: not a whole CPU, or 2 trials on 2
# cores starve their workers
DRIVER_CPU = 0.01


def parse_resources(text: str) -> dict[str, float]:
    """`"a4000:0.25,bigmem:1"` -> {"a4000": 0.25, "bigmem": 1.0}: custom
    Ray resources per worker."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, amount = part.partition(":")
        try:
            value = float(amount) if sep else float("nan")
        except ValueError:
            value = float("nan")
        check(bool(name.strip()) and value > 0 and name.strip() not in ("CPU", "GPU", "memory"),
              "cluster.resources", "expected name:amount[,name:amount] with amounts > 0 (CPU and "
              f"GPU have their own keys), got {text!r}")
        out[name.strip()] = value
    return out


@dataclass(frozen=True)
class ClusterConfig:
    workers: int = 1  # Ray Train workers per trial (DDP when > 1)
    # Train on GPUs. Unset ("auto"): the sweep driver sets it once connected to Ray, true when the
    # cluster has a GPU (`resolve_use_gpu`); `train` sets it by where it runs (--device).
    use_gpu: bool | None = None
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 1.0
    # torch: every trial is a Ray Train TorchTrainer (DDP, worker restarts). function: the loop runs
    # in the Tune trial process itself, one worker, ~5x less start-up (smoke
    # tests, many tiny trials).
    trainer: str = "torch"
    # How a trial's workers are spread over nodes (Ray Train's `ScalingConfig.placement_strategy`):
    # PACK fills few nodes, STRICT_SPREAD puts every worker on its own node (DDP across nodes).
    placement: str = "PACK"
    # Custom Ray resources each worker needs, "name:amount,...": a trial only runs on nodes started
    # with `ray start --resources='{"name": N}'` (e.g. one GPU model, or nodes a
    # lab reserves for sweeps).
    resources: str = ""
    # Say on the console when a trial or evaluation has waited this long for resources.
    wait_warn_s: float = 60.0

    def __post_init__(self) -> None:
        check(self.workers >= 1, "cluster.workers", f"must be >= 1, got {self.workers}")
        check(
            self.cpus_per_worker > 0,
            "cluster.cpus_per_worker",
            f"must be > 0, got {self.cpus_per_worker}",
        )
        check(
            self.gpus_per_worker > 0,
            "cluster.gpus_per_worker",
            f"must be > 0, got {self.gpus_per_worker}",
        )
        bounds.check_at_most(self.workers, bounds.MAX_WORKERS, "cluster.workers")
        bounds.check_at_most(
            self.cpus_per_worker, bounds.MAX_WORKER_CPUS, "cluster.cpus_per_worker"
        )
        bounds.check_at_most(
            self.gpus_per_worker, bounds.MAX_WORKER_GPUS, "cluster.gpus_per_worker"
        )
        check_choice(self.trainer, "cluster.trainer", TRAINERS)
        check_choice(self.placement, "cluster.placement", PLACEMENTS)
        parse_resources(self.resources)
        check(self.wait_warn_s > 0, "cluster.wait_warn_s", f"must be > 0, got {self.wait_warn_s}")
        check(self.trainer == "torch" or self.workers == 1, "cluster.trainer",
              f"'function' trains in one process; cluster.workers={self.workers} needs 'torch'")

    @property
    def custom_resources(self) -> dict[str, float]:
        return parse_resources(self.resources)

    def trial_cpus(self) -> float:
        """CPUs one trial holds: its workers', and a `torch` trial's driver's."""
        driver = DRIVER_CPU if self.trainer == "torch" else 0.0
        return self.workers * self.cpus_per_worker + driver

    def resolved(self, cluster_gpus: float) -> ClusterConfig:
        """This config with `use_gpu` concrete, for a cluster holding `cluster_gpus` GPUs."""
        return dataclasses.replace(self, use_gpu=resolve_use_gpu(self.use_gpu, cluster_gpus))


def resolve_use_gpu(use_gpu: bool | None, cluster_gpus: float) -> bool:
    """`cluster.use_gpu` made concrete: unset (auto) trains on GPUs when the cluster has any."""
    return cluster_gpus > 0 if use_gpu is None else use_gpu
