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

import time
from dataclasses import dataclass, field

import torch

from abacus_ray.config import ExperimentConfig, TaskConfig
from abacus_ray.training.progressive import backprop_limit, depth_distribution
from abacus_ray.training.schedules import accumulation_steps, ramped_batch_size

# One RTX A4000: dense fp16 tensor-core peak (NVIDIA's data sheet), and the share of it the official
# fp16 code is taken to reach (docs/fidelity.md derives 0.30 from our H100 profile of the same model).
A4000_PEAK_FLOPS = 76.7e12
A4000_UTILISATION = 0.30
A4000_HOUR_FLOPS = A4000_PEAK_FLOPS * A4000_UTILISATION * 3600.0  # model FLOPs in one A4000-hour


def expected_depths(cfg: ExperimentConfig) -> tuple[float, float]:
    """(E[total recurrences], E[grad recurrences]) per micro-batch under the progressive loss."""
    r, alpha = cfg.model.recurrences, cfg.train.alpha
    limit = backprop_limit(r, cfg.train.max_backprop)
    dist = depth_distribution(r, limit)
    total = sum(float(p) * (n + k) for (n, k), p in dist.items()) if alpha != 0 else 0.0
    grad = sum(float(p) * k for (n, k), p in dist.items()) if alpha != 0 else 0.0
    if alpha != 1:
        total, grad = total + r, grad + limit
    return total, grad


def padded_length(task: TaskConfig) -> int:
    """Tokens of every official training sample: the longest training line + EOS, the width the
    official data file pads every line to (docs/official-code.md §6.7)."""
    from abacus_ray.tasks.problems import pad_words_needed

    second = task.train_max_array if task.name == "sort" else task.train_max_len
    return pad_words_needed(task.name, task.train_max_len, second, task.index_hints) + 1


def sample_flops(cfg: ExperimentConfig) -> float:
    """Model FLOPs (forward + backward) of one training sample, as the MFU counts them
    (`ArithmeticTransformer.flops_per_token`), at the official padded length."""
    from abacus_ray.model.transformer import ArithmeticTransformer

    with torch.device("meta"):  # shapes only: instant even for the paper's model
        model = ArithmeticTransformer.for_experiment(cfg)
    seq = padded_length(cfg.task)
    total, grad = expected_depths(cfg)
    return model.flops_per_token(seq, total, grad_recurrences=grad) * seq


def a4000_samples(cfg: ExperimentConfig) -> int | None:
    """The training samples `train.budget_a4000_hours` buys for this model and task (None if unset)."""
    hours = cfg.train.budget_a4000_hours
    if hours is None:
        return None
    return max(1, int(hours * A4000_HOUR_FLOPS / sample_flops(cfg)))


def plan(cfg: ExperimentConfig, workers: int = 1) -> dict:
    """What a budget means before a run: the A4000-hours, model FLOPs, samples and optimiser steps it
    buys, and the device- and wall-hours limit on `workers` devices. For `--dry-run` and `describe`."""
    tc = cfg.train
    samples = a4000_samples(cfg)
    limit = min(s for s in (samples, tc.max_samples) if s is not None) if (samples or tc.max_samples) else None
    steps = None
    if limit is not None:  # the ramp follows the sample fraction: step through it (exact, no clock)
        steps, seen, mbs_eff = 0, 0, tc.micro_batch * workers
        while seen < limit and (tc.max_steps is None or steps < tc.max_steps):
            batch = ramped_batch_size(seen / limit, tc.global_batch, mbs_eff, tc.batch_ramp)
            seen += accumulation_steps(batch, mbs_eff) * mbs_eff
            steps += 1
    elif tc.max_steps is not None:
        steps = tc.max_steps
    return {"a4000_hours": tc.budget_a4000_hours,
            "model_flops": None if samples is None else samples * sample_flops(cfg),
            "samples": limit, "optimizer_steps": steps, "workers": workers,
            "device_hours": tc.budget_hours,
            "wall_hours": None if tc.budget_hours is None else tc.budget_hours / workers}


@dataclass
class Budget:
    """Progress counters of one run (all ranks agree on them) and its limits."""

    budget_hours: float | None
    max_steps: int | None = None
    max_samples: int | None = None
    world_size: int = 1
    a4000_samples: int | None = None  # samples the A4000-hour budget buys (`a4000_samples`)
    step: int = 0  # optimiser steps taken
    samples: int = 0  # training samples consumed, all ranks together
    hours_before: float = 0.0  # device-hours spent in earlier sessions (resume)
    _started: float = field(default_factory=time.perf_counter, repr=False)
    _elapsed_override: float | None = field(default=None, repr=False)

    @classmethod
    def from_config(cls, cfg: ExperimentConfig, world_size: int = 1) -> Budget:
        if world_size < 1:
            raise ValueError(f"world_size: must be >= 1, got {world_size}")
        tc = cfg.train
        return cls(tc.budget_hours, tc.max_steps, tc.max_samples, world_size, a4000_samples=a4000_samples(cfg))

    def start(self) -> None:
        """Restart this session's clock (called when the training loop begins)."""
        self._started = time.perf_counter()
        self._elapsed_override = None

    def local_elapsed_s(self) -> float:
        """Wall seconds of this session as measured by this process."""
        return time.perf_counter() - self._started

    def session_elapsed_s(self) -> float:
        """Wall seconds of this session; under DDP the value all ranks agreed on last (see `sync`)."""
        if self._elapsed_override is not None:
            return self._elapsed_override
        return self.local_elapsed_s()

    def set_session_elapsed(self, seconds: float) -> None:
        """Adopt an agreed elapsed time (rank 0's) so every rank takes the same schedule and stop decisions."""
        self._elapsed_override = float(seconds)

    @property
    def device_hours(self) -> float:
        return self.hours_before + self.session_elapsed_s() / 3600.0 * self.world_size

    def fraction(self) -> float:
        """f = max(device_hours / budget_hours, step / max_steps, samples / max_samples,
        samples / a4000_samples) over the limits set."""
        parts = [] if self.budget_hours is None else [self.device_hours / self.budget_hours]
        if self.max_steps is not None:
            parts.append(self.step / self.max_steps)
        for limit in (self.max_samples, self.a4000_samples):
            if limit is not None:
                parts.append(self.samples / limit)
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
