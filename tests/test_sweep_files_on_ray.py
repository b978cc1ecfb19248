"""Sweep files run with the tiny preset through Tune and Ray Data and write their axes to Parquet.

Three figures cover what differs between sweeps on the Ray path: two tasks from one model (Fig. 5's
addsub), several test-time recurrences per model (Fig. 15) and sorting (Table 1), one trial of each.
Trials use `cluster.trainer=function` (the loop inside the Tune trial); the TorchTrainer path is
covered by `test_fig10_on_ray.py` and `test_multinode.py`, and every sweep's expansion by
`test_sweeps.py` (no Ray).
"""

import math
import numbers

import numpy as np
import pytest

from abacus_ray.api.sweeps import load_sweep
from abacus_ray.cli import main
from abacus_ray.evaluation.results import config_columns, read_cells
from abacus_ray.storage import on_disk

pytestmark = [pytest.mark.ray, pytest.mark.cost(110)]


def _plain(v):
    """A Parquet cell and a config value compared as values: nulls alike, numbers as floats."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return float(v) if isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) else str(v)


@pytest.mark.parametrize("name", ["fig5_add_sub", "fig15_recurrence_outputs", "table1_sorting"])
def test_sweep_runs_tiny_and_writes_swept_columns(name, tmp_path, ray_local):
    flags = ["--set", "train.max_steps=8", "--set", "eval.per_cell=2", "--set", "cluster.trainer=function"]
    rc = main(["sweep", name, "--preset", "tiny", "--storage", str(tmp_path), "--max-trials", "1", "--seeds", "1",
               "--grid", "cells:1-2x1-2", "--no-dashboard", *flags])
    assert rc == 0
    sweep = load_sweep(name)
    overrides = {"train.max_steps": "8", "eval.per_cell": "2", "cluster.trainer": "function"}
    trials = sweep.expand("tiny", seeds=1, overrides=overrides, grids=("cells:1-2x1-2",))[:1]
    df = read_cells(on_disk(tmp_path / sweep.name / "results"))
    assert df["model_id"].nunique() == len(trials)
    assert set(df["run_id"]) == {t.name for t in trials}
    recurrences = sweep.eval_recurrences_for("tiny") or (None,)
    cells_per_model = df.groupby("model_id").size()
    assert (cells_per_model >= 4 * len(recurrences)).all()  # 2x2 cells (x tasks, x test-time recurrences)
    for t in trials:  # every config value of each trial (its swept values included) is in its rows
        rows = df[df["run_id"] == t.name]
        for key, value in config_columns(t.config).items():
            assert {_plain(v) for v in rows[key].unique()} == {_plain(value)}, (t.name, key)
        assert all(key in df.columns for key in t.params if not key.startswith("eval."))
