"""`EvalConfig`: how a checkpoint is scored (docs/official-code.md §7)."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_ray.config import bounds
from abacus_ray.config.dicts import check, check_choice
from abacus_ray.config.train import PRECISIONS

ENGINES = ("teacher", "kv", "naive")
HINT_SCORINGS = ("official", "strict")


@dataclass(frozen=True)
class EvalConfig:
    """Which grids (names from `evaluation.grids`), how many problems per cell, which engine."""

    grids: tuple[str, ...] = ("paper-addition",)
    per_cell: int = 100
    seed: int = 0
    engine: str = "teacher"
    recurrences: int | None = None  # test-time recurrences; None = the model's eval recurrences
    # auto: fp32, the official evaluation's (bf16 changes too many verdicts: docs/fidelity.md,
    # "Precision")
    precision: str = "auto"
    token_budget: int = 0  # tokens per engine batch (rows x padded length); 0 = sized to the device
    # sorting exact match also checks the EOS (the official code does not)
    sort_require_eos: bool = False
    # Index-hint models (Fig. 21): "official" scores the digits only, hint symbols dropped from the
    # output, up to twice the answer field generated (docs/fidelity.md); "strict" also checks every
    # hint.
    hint_scoring: str = "official"
    # The validation score (evaluation/validation.py): exact match on diagonal cells (n, n) scored
    # every `validation_every` optimiser steps during training, the metric Tune's early stopping
    # reads; () = no validation score.
    validation_lengths: tuple[int, ...] = ()
    validation_every: int = 500
    validation_per_cell: int = 50

    def __post_init__(self) -> None:
        check(self.per_cell >= 1, "eval.per_cell", f"must be >= 1, got {self.per_cell}")
        check(self.seed >= 0, "eval.seed", f"must be >= 0, got {self.seed}")
        bounds.check_at_most(self.per_cell, bounds.MAX_PER_CELL, "eval.per_cell")
        check_choice(self.engine, "eval.engine", ENGINES)
        check(self.recurrences is None or self.recurrences >= 1, "eval.recurrences",
              f"must be >= 1, got {self.recurrences}")
        bounds.check_at_most(self.recurrences or 1, bounds.MAX_RECURRENCES, "eval.recurrences")
        check_choice(self.precision, "eval.precision", PRECISIONS)
        check_choice(self.hint_scoring, "eval.hint_scoring", HINT_SCORINGS)
        check(all(n >= 1 for n in self.validation_lengths), "eval.validation_lengths",
              f"lengths must be >= 1, got {list(self.validation_lengths)}")
        bounds.check_at_most(len(self.validation_lengths), bounds.MAX_VALIDATION_LENGTHS,
                             "eval.validation_lengths")
        bounds.check_at_most(max(self.validation_lengths, default=1), bounds.MAX_LENGTH,
                             "eval.validation_lengths")
        bounds.check_at_most(self.validation_per_cell, bounds.MAX_PER_CELL,
                             "eval.validation_per_cell")
        bounds.check_at_most(self.token_budget, bounds.MAX_TOKEN_BUDGET, "eval.token_budget")
        check(self.validation_every >= 1, "eval.validation_every",
              f"must be >= 1, got {self.validation_every}")
        check(self.validation_per_cell >= 1, "eval.validation_per_cell",
              f"must be >= 1, got {self.validation_per_cell}")
        check(self.token_budget >= 0, "eval.token_budget",
              f"must be >= 0 (0 = auto), got {self.token_budget}")
