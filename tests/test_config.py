"""Config round trips, overrides and validation messages."""

import json

import pytest

from abacus_ray.config import ExperimentConfig, preset
from abacus_ray.config.dicts import to_json


@pytest.mark.parametrize("name", ["tiny", "paper"])
def test_presets_round_trip_through_json(name):
    cfg = preset(name)
    again = ExperimentConfig.from_dict(json.loads(to_json(cfg)))
    assert again == cfg


def test_overrides_are_typed_and_validated():
    cfg = preset("paper", ["model.layers=8", "model.recurrences=2", "train.lr=2e-4", "train.max_steps=none",
                           "task.name=mul", "eval.grids=a,b"])
    assert (cfg.model.layers, cfg.model.recurrences, cfg.train.lr) == (8, 2, 2e-4)
    assert cfg.train.max_steps is None and cfg.eval.grids == ("a", "b") and cfg.task.name == "mul"


@pytest.mark.parametrize("override, key", [
    ("model.heads=7", "model.heads"),
    ("model.layers=0", "model.layers"),
    ("model.recurrences=0", "model.recurrences"),
    ("model.max_k=-1", "model.max_k"),
    ("model.positions=alibi", "model.positions"),
    ("model.max_k=1000", "model.abacus_table"),
    ("task.name=div", "task.name"),
    ("task.train_max_len=0", "task.train_max_len"),
    ("task.pad_p=1.0", "task.pad_p"),
    ("train.lr=fast", "train.lr"),
    ("nosuch.key=1", "nosuch.key"),
    ("model.nosuch=1", "model.nosuch"),
    ("seed=abc", "seed"),
])
def test_bad_values_name_their_key(override, key):
    with pytest.raises(ValueError, match=rf"^{key}:"):
        preset("tiny", [override])


def test_unknown_preset():
    with pytest.raises(ValueError, match="preset"):
        preset("huge")
