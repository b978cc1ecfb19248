"""The training budget: the limits a run may spend, and the fraction f of them spent.

The paper controls everything by wall-clock time on one GPU (docs/official-code.md §6.3-6.4): the lr
trapezoid, the batch ramp and the stop all follow the fraction of a 24 h budget, which it calls
"8 exaFLOP" (a single RTX A4000 for 24 hours, Table 4). A wall-clock budget trains several times
more on an H100 than on that A4000, so the `paper` preset counts the budget in *A4000-hours of
model FLOPs* instead (`budget_a4000_hours`), turned once into a number of training samples by the
model's FLOPs per sample (`sample_flops`): two users on different GPUs train the same samples, with
the same optimiser steps and the same schedules. How the A4000-hour is priced, and how close that
is to the paper's own runs, is in docs/fidelity.md ("Training").

The other limits: device-hours (`budget_hours`: elapsed wall time x devices held, GPU-hours on GPUs,
carried over a resume), optimiser steps and samples. The fraction that drives the schedules and
the stop is the largest of the limits set; without device-hours a run is deterministic and exactly
resumable.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

from abacus_ray.config import ExperimentConfig
from abacus_ray.model.memory import meta_model
from abacus_ray.tasks.stream import padded_length
from abacus_ray.training.progressive import backprop_limit, expected_depths
from abacus_ray.training.schedules import accumulation_steps, ramped_batch_size

# One RTX A4000: dense fp16 tensor-core peak (NVIDIA's data sheet), and the share of it the official
# fp16 code is taken to reach, derived from an H100 profile of the same model (docs/fidelity.md,
# "The budget: A4000-hours of model FLOPs").
A4000_PEAK_FLOPS = 76.7e12
A4000_UTILISATION = 0.30
A4000_HOUR_FLOPS = A4000_PEAK_FLOPS * A4000_UTILISATION * 3600.0  # model FLOPs in one A4000-hour


def sample_flops(cfg: ExperimentConfig) -> float:
    """Model FLOPs (forward + backward) of one training sample, as the MFU counts them
    (`ArithmeticTransformer.flops_per_token`), at the official padded length."""
    model = meta_model(cfg)
    seq = padded_length(cfg.task)
    r = cfg.model.recurrences
    total, grad = expected_depths(r, backprop_limit(r, cfg.train.max_backprop), cfg.train.alpha)
    return model.flops_per_token(seq, total, grad_recurrences=grad) * seq


def sample_limit(cfg: ExperimentConfig) -> tuple[int | None, float | None]:
    """(The samples a run may consume, the model FLOPs of `train.budget_a4000_hours`): the smaller
    of `train.max_samples` and the samples those FLOPs buy; None where unset."""
    tc = cfg.train
    flops = None if tc.budget_a4000_hours is None else tc.budget_a4000_hours * A4000_HOUR_FLOPS
    limits = [] if tc.max_samples is None else [tc.max_samples]
    if flops is not None:
        limits.append(max(1, int(flops / sample_flops(cfg))))
    return (min(limits) if limits else None), flops


def budget_terms(cfg: ExperimentConfig, workers: int = 1) -> dict:
    """What a budget means before a run: the A4000-hours, model FLOPs, samples and optimiser steps
    it buys, and the device- and wall-hours limit on `workers` devices. For `--dry-run` and
    `train`."""
    tc = cfg.train
    samples, flops = sample_limit(cfg)
    steps = tc.max_steps
    if samples is not None:
        steps = _optimizer_steps(samples, tc.max_steps, tc.micro_batch * workers, tc.global_batch,
                                 tc.batch_ramp)
    return {"a4000_hours": tc.budget_a4000_hours, "model_flops": flops, "samples": samples,
            "optimizer_steps": steps, "workers": workers, "device_hours": tc.budget_hours,
            "wall_hours": None if tc.budget_hours is None else tc.budget_hours / workers}


@functools.lru_cache(maxsize=256)
def _optimizer_steps(samples: int, max_steps: int | None, mbs_eff: int, global_batch: int,
                     batch_ramp: float) -> int:
    """Optimiser steps until `samples` are seen: the ramp follows the sample fraction, so step
    through it (exact, no clock); cached, as a sweep's trials mostly share one schedule (seeds,
    embeddings)."""
    steps = seen = 0
    while seen < samples and (max_steps is None or steps < max_steps):
        batch = ramped_batch_size(seen / samples, global_batch, mbs_eff, batch_ramp)
        seen += accumulation_steps(batch, mbs_eff) * mbs_eff
        steps += 1
    return steps


@dataclass
class Budget:
    """Progress counters of one run (all ranks agree on them) and its limits."""

    budget_hours: float | None
    max_steps: int | None = None
    max_samples: int | None = None
    world_size: int = 1
    step: int = 0  # optimiser steps taken
    samples: int = 0  # training samples consumed, all ranks together
    hours_before: float = 0.0  # device-hours spent in earlier sessions (resume)
    _started: float = field(default_factory=time.perf_counter, repr=False)
    _elapsed_override: float | None = field(default=None, repr=False)

    @classmethod
    def from_config(cls, cfg: ExperimentConfig, world_size: int = 1) -> Budget:
        if world_size < 1:
            raise ValueError(f"world_size: must be >= 1, got {world_size}")
        return cls(cfg.train.budget_hours, cfg.train.max_steps, sample_limit(cfg)[0], world_size)

    def start(self) -> None:
        """Restart this session's clock (called when the training loop begins)."""
        self._started = time.perf_counter()
        self._elapsed_override = None

    def local_elapsed_s(self) -> float:
        """Wall seconds of this session as measured by this process."""
        return time.perf_counter() - self._started

    def session_elapsed_s(self) -> float:
        """Wall seconds of this session; under DDP the value all ranks agreed on last (`sync`)."""
        if self._elapsed_override is not None:
            return self._elapsed_override
        return self.local_elapsed_s()

    def set_session_elapsed(self, seconds: float) -> None:
        """Adopt an agreed elapsed time (rank 0's) so every rank takes the same schedule and stop
        decisions."""
        self._elapsed_override = float(seconds)

    @property
    def device_hours(self) -> float:
        return self.hours_before + self.session_elapsed_s() / 3600.0 * self.world_size

    def fraction(self) -> float:
        """f = max(device_hours / budget_hours, step / max_steps, samples / max_samples) over the
        limits set (`max_samples` here includes the A4000-hour budget, `sample_limit`)."""
        parts = [] if self.budget_hours is None else [self.device_hours / self.budget_hours]
        if self.max_steps is not None:
            parts.append(self.step / self.max_steps)
        if self.max_samples is not None:
            parts.append(self.samples / self.max_samples)
        if not parts:
            raise ValueError("train: no budget limit is set")
        return max(parts)

    def exhausted(self) -> bool:
        return self.fraction() >= 1.0

    def state(self) -> dict:
        """Checkpointable counters (plain numbers)."""
        return {"step": self.step, "samples": self.samples, "device_hours": self.device_hours}

    def restore(self, state: dict) -> None:
        self.step = int(state["step"])
        self.samples = int(state["samples"])
        self.hours_before = float(state["device_hours"])
        self.start()
