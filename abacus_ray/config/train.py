"""`TrainConfig`: budget, optimiser, schedules and objective.

The paper's values: Table 5; the official code's: docs/official-code.md §4.13 and §6.
"""

from __future__ import annotations

from dataclasses import dataclass

from abacus_ray.config import bounds
from abacus_ray.config.dicts import check, check_choice

# bf16-pure: the whole forward in bf16 (weights and residual stream); in training with fp32 master
# weights and AdamW state (training/master.py), a numeric recipe other than the paper's autocast.
PRECISIONS = ("auto", "fp32", "tf32", "bf16", "fp16", "bf16-pure")


def resolved_precision(name: str, device_type: str, *, evaluation: bool = False) -> str:
    """The one "auto" rule. Training: bf16 on CUDA, fp32 elsewhere (on CPU autocast is slower than
    fp32 for models this small). Evaluation: fp32 everywhere, as the official evaluation, because
    bf16 changes more verdicts than the 0.1 % / one-problem rule allows (docs/fidelity.md,
    "Precision"); bf16 stays an option. TF32 exists on CUDA only: elsewhere it is fp32."""
    if name == "auto":
        return "bf16" if device_type == "cuda" and not evaluation else "fp32"
    if name == "tf32" and device_type != "cuda":
        return "fp32"
    return name


def resolved_compile(compile_block: bool | None, device_type: str,
                     randomised_fire: bool = False) -> bool:
    """The one `train.compile` rule: None (the default) compiles the recurrent block on CUDA, where
    it fuses the residual adds, LayerNorms and casts around the matmuls, and stays eager on CPU,
    where a compile is slow to pay back and the default's numerics stay those of eager.

    A compiled block trains on batches padded to one width. Randomised FIRE draws its positions at
    the batch's width inside the block, so padding would change which positions the real tokens
    get: such a model trains eager (and `ExperimentConfig` refuses `train.compile=true` for it).
    """
    if randomised_fire:
        return False
    if compile_block is None:
        return device_type == "cuda"
    return compile_block


# How the workers of a multi-worker trial draw the Abacus offset and the progressive-loss depth of a
# micro-batch: "per_worker" each its own (the official code seeds every rank with seed + 10 x rank,
# docs/fidelity.md), "shared" one value for all (the whole global micro-batch sees one offset and
# depth).
WORKER_DRAWS = ("per_worker", "shared")
REDUCTIONS = ("mean", "none")


@dataclass(frozen=True)
class TrainConfig:
    """How a model is trained.

    The budget (`training/budget.py`, docs/fidelity.md "Training") is any of four limits, and the
    fraction that drives the lr schedule, the batch ramp and the stop is the largest of theirs:
    `budget_a4000_hours`, the paper's hardware-independent compute (Table 4's RTX A4000-hours as
    model FLOPs, so the same samples on any GPU; the default, 24); `budget_hours`, device-hours on
    this hardware (wall time x devices held); `max_steps` (optimiser steps); `max_samples`. A budget
    without wall-clock limits is deterministic and exactly resumable.
    """

    budget_a4000_hours: float | None = 24.0
    budget_hours: float | None = None
    max_steps: int | None = None
    max_samples: int | None = None
    lr: float = 1e-4
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-12
    weight_decay: float = 0.01
    warmup: float = 0.1  # fraction of the budget
    cooldown: float = 0.1
    global_batch: int = 8192
    micro_batch: int = 512
    # fraction of the budget over which the batch ramps to global_batch; 0 = off
    batch_ramp: float = 0.6
    grad_clip: float = 0.5
    # auto: bf16 autocast on GPU, fp32 on CPU; fp16 = the paper's autocast + GradScaler
    precision: str = "auto"
    alpha: float = 1.0  # progressive loss weight (docs/official-code.md §4.13)
    max_backprop: int | None = None  # M; None = max(R // 2, 1)
    throttle: bool = False
    loss_reduction: str = "mean"
    mask_before_equals: bool = True  # False: also score the prompt (Fig. 16)
    report_every_s: float = 10.0
    checkpoint_every_min: float = 30.0
    worker_draws: str = "per_worker"  # WORKER_DRAWS; a single worker draws the same either way
    # torch.compile of the recurrent block alone, batches padded to one length
    # (model.compile_block); None: compiled on CUDA, eager elsewhere (`resolved_compile`)
    compile: bool | None = None

    def __post_init__(self) -> None:
        check(self.budget_a4000_hours is None or self.budget_a4000_hours > 0,
              "train.budget_a4000_hours", f"must be > 0, got {self.budget_a4000_hours}")
        check(self.budget_hours is None or self.budget_hours > 0, "train.budget_hours",
              f"must be > 0, got {self.budget_hours}")
        limits = (self.budget_a4000_hours, self.budget_hours, self.max_steps, self.max_samples)
        check(any(v is not None for v in limits), "train.budget_a4000_hours",
              "no budget: set it, train.budget_hours, train.max_steps or train.max_samples")
        check(self.max_steps is None or self.max_steps >= 1, "train.max_steps",
              f"must be >= 1, got {self.max_steps}")
        check(self.max_samples is None or self.max_samples >= 1, "train.max_samples",
              f"must be >= 1, got {self.max_samples}")
        bounds.check_at_most(self.budget_a4000_hours or 0, bounds.MAX_BUDGET_HOURS,
                             "train.budget_a4000_hours")
        bounds.check_at_most(self.budget_hours or 0, bounds.MAX_BUDGET_HOURS, "train.budget_hours")
        bounds.check_at_most(self.max_steps or 0, bounds.MAX_STEPS, "train.max_steps")
        bounds.check_at_most(self.max_samples or 0, bounds.MAX_SAMPLES, "train.max_samples")
        check(self.lr > 0, "train.lr", f"must be > 0, got {self.lr}")
        check(0 <= self.warmup <= 1 and 0 <= self.cooldown <= 1
              and self.warmup + self.cooldown <= 1, "train.warmup",
              f"warmup {self.warmup} + cooldown {self.cooldown} must lie in [0, 1]")
        check(self.micro_batch >= 1, "train.micro_batch", f"must be >= 1, got {self.micro_batch}")
        bounds.check_at_most(self.micro_batch, bounds.MAX_MICRO_BATCH, "train.micro_batch")
        bounds.check_at_most(self.global_batch, bounds.MAX_GLOBAL_BATCH, "train.global_batch")
        check(self.global_batch >= self.micro_batch, "train.global_batch",
              f"{self.global_batch} is smaller than train.micro_batch={self.micro_batch}")
        check(0 <= self.batch_ramp <= 1, "train.batch_ramp",
              f"must be in [0, 1], got {self.batch_ramp}")
        check(self.grad_clip >= 0, "train.grad_clip", f"must be >= 0, got {self.grad_clip}")
        check_choice(self.precision, "train.precision", PRECISIONS)
        check(0 <= self.alpha <= 1, "train.alpha", f"must be in [0, 1], got {self.alpha}")
        check(self.max_backprop is None or self.max_backprop >= 1, "train.max_backprop",
              f"must be >= 1, got {self.max_backprop}")
        bounds.check_at_most(self.max_backprop or 1, bounds.MAX_RECURRENCES, "train.max_backprop")
        check_choice(self.loss_reduction, "train.loss_reduction", REDUCTIONS)
        check_choice(self.worker_draws, "train.worker_draws", WORKER_DRAWS)
        check(self.report_every_s > 0, "train.report_every_s",
              f"must be > 0, got {self.report_every_s}")
        check(self.checkpoint_every_min > 0, "train.checkpoint_every_min",
              f"must be > 0, got {self.checkpoint_every_min}")
