"""`ExperimentConfig`: one trained model = task + model + training + evaluation + placement.

Built once (from a preset and overrides, or from a checkpoint's JSON) and passed on as the object
itself; it round-trips through a nested dict only where a dict is needed (the JSON beside every
checkpoint, the Parquet config columns) and accepts dotted overrides (`--set model.layers=8`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from abacus_ray.config.cluster import ClusterConfig
from abacus_ray.config.dicts import check, check_text, from_dict, to_dict, to_json, with_overrides
from abacus_ray.config.evaluation import EvalConfig
from abacus_ray.config.model import ModelConfig
from abacus_ray.config.task import TaskConfig
from abacus_ray.config.train import TrainConfig


@dataclass(frozen=True)
class ExperimentConfig:
    name: str = "run"
    seed: int = 0
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    # the plugin modules the model needs (`abacus_ray.plugins`), imported before the rest is built
    plugins: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check(isinstance(self.name, str), "name", f"expected a string, got {self.name!r}")
        check_text(self.name, "name")
        check(0 <= self.seed < 2**32, "seed", f"must be in [0, 2**32), got {self.seed}")
        m, t = self.model, self.task
        if m.uses_abacus:
            need = m.max_k + t.longest_digit_run + 1
            check(m.abacus_table >= need, "model.abacus_table",
                  f"{m.abacus_table} rows cannot hold max_k={m.max_k} + "
                  f"{t.longest_digit_run}-digit training runs (+ row 0); "
                  f"set model.abacus_table >= {need}")
        check(not (self.train.compile and m.fire_max_length), "train.compile",
              "randomised FIRE (model.fire_max_length > 0) draws its positions at the batch's "
              "width, and a compiled block pads batches: it would train other positions; leave "
              "train.compile unset (eager) for this model")

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExperimentConfig:
        return from_dict(cls, data)

    def with_overrides(self, overrides: Mapping[str, Any] | Sequence[str] | None
                       ) -> ExperimentConfig:
        return with_overrides(self, overrides)

    def to_json(self) -> str:
        return to_json(self)

    def replace(self, **sections: Any) -> ExperimentConfig:
        return dataclasses.replace(self, **sections)
