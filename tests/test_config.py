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
    ("model.positions=kerple", "model.positions"),
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


def test_former_key_names_are_read_as_todays():
    """A config written before `eval.probe_*` became `eval.validation_*` (a checkpoint's config, a
    sweep.json, a `--set`) loads with the value under today's name, and its sweep resumes."""
    from abacus_ray.config.identity import sweep_change

    cfg = preset("tiny", ["eval.validation_lengths=6,8", "eval.validation_every=20"])
    old = cfg.to_dict()
    old["eval"] = {k.replace("validation_", "probe_"): v for k, v in old["eval"].items()}
    assert "probe_lengths" in old["eval"]
    assert ExperimentConfig.from_dict(old) == cfg
    assert preset("tiny", ["eval.probe_lengths=6,8", "eval.probe_every=20"]) == cfg
    recorded = {"preset": "tiny", "trials": [{"name": "a", **old}]}
    assert sweep_change(recorded, {"preset": "tiny", "trials": [{"name": "a", **cfg.to_dict()}]}) is None
    with pytest.raises(ValueError, match="given twice"):
        preset("tiny", ["eval.probe_every=20", "eval.validation_every=30"])


@pytest.mark.parametrize("word", ["unset", "null", "none", "UNSET"])
def test_unset_is_null_in_an_optional_field(word):
    """The reference says `unset` is JSON's null; `--set key=unset` used to be refused."""
    cfg = preset("tiny", [f"model.eval_recurrences={word}", f"train.budget_hours={word}"])
    assert cfg.model.eval_recurrences is None and cfg.train.budget_hours is None
    with pytest.raises(ValueError, match="^model.layers"):
        preset("tiny", ["model.layers=unset"])  # not optional: still a number
