"""config layer: every section's frozen dataclass, the presets and the dict / `--set` machinery.

Below every other layer: it imports none of them, so any module may import it.

dicts        config <-> plain dict <-> `--set key=value`, typed coercion, one-line errors
task         TaskConfig, digit-run rule          model       ModelConfig, ST / ST w/ II / LT names
train        TrainConfig, the precision rule     evaluation  EvalConfig, engine names
cluster      ClusterConfig (placement)           experiment  ExperimentConfig (all sections)
presets      `tiny` and `paper`                  identity    what a sweep.json rerun must match
"""

from abacus_ray.config.cluster import ClusterConfig
from abacus_ray.config.evaluation import EvalConfig
from abacus_ray.config.experiment import ExperimentConfig
from abacus_ray.config.model import ModelConfig
from abacus_ray.config.presets import PRESETS, preset
from abacus_ray.config.task import TaskConfig
from abacus_ray.config.train import TrainConfig

__all__ = ["ClusterConfig", "EvalConfig", "ExperimentConfig", "ModelConfig", "PRESETS",
           "TaskConfig", "TrainConfig", "preset"]
