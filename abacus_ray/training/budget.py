"""The training budget: device-hours, optional step and sample limits, and the fraction f spent.

The paper controls everything by wall-clock time on one GPU (docs/official-code.md §6.3-6.4): the lr trapezoid, the
batch ramp and the stop all follow the fraction of a 24 h budget. We generalise that to
device-hours (elapsed wall time x devices held: GPU-hours on GPUs, wall-hours x workers on CPU)
and add two optional hardware-independent limits, optimiser steps and samples. The fraction that
drives the schedules and the stop is the largest of the three, so a steps-only budget (with a huge
`budget_hours`) makes a run deterministic and exactly resumable. Device-hours spent before a resume
are carried over, so the schedule continues where it left off.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from abacus_ray.config.train import TrainConfig


@dataclass
class Budget:
    """Progress counters of one run (all ranks agree on them) and its limits."""

    budget_hours: float
    max_steps: int | None = None
    max_samples: int | None = None
    world_size: int = 1
    step: int = 0  # optimiser steps taken
    samples: int = 0  # training samples consumed, all ranks together
    hours_before: float = 0.0  # device-hours spent in earlier sessions (resume)
    _started: float = field(default_factory=time.perf_counter, repr=False)
    _elapsed_override: float | None = field(default=None, repr=False)

    @classmethod
    def from_config(cls, cfg: TrainConfig, world_size: int = 1) -> Budget:
        if world_size < 1:
            raise ValueError(f"world_size: must be >= 1, got {world_size}")
        return cls(cfg.budget_hours, cfg.max_steps, cfg.max_samples, world_size)

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
        """f = max(device_hours / budget_hours, step / max_steps, samples / max_samples)."""
        parts = [self.device_hours / self.budget_hours]
        if self.max_steps is not None:
            parts.append(self.step / self.max_steps)
        if self.max_samples is not None:
            parts.append(self.samples / self.max_samples)
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
