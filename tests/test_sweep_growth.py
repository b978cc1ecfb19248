"""A finished sweep grows on Ray: more seeds and a larger grid, then more steps. Only what is
missing runs: the kept trials' models stay (their Train runs end at once), the new trials train,
only missing cells are scored, and models trained further replace their shorter selves in the
results (whose rows move to `superseded/`)."""

from __future__ import annotations

import pytest

from abacus_ray import storage
from abacus_ray.cli.sweep import main
from abacus_ray.evaluation.results import read_cells
from abacus_ray.figures import figure
from abacus_ray.model.checkpoint import list_checkpoints

pytestmark = pytest.mark.ray

SMALL = ["--set", "model.hidden=16", "--set", "model.intermediate=32", "--set", "model.heads=2",
         "--set", "eval.per_cell=4", "--tracking", "none", "--no-dashboard"]


def _sweep(root, *flags: str) -> int:
    return main(figure("fig10_k"), ["--storage", str(root), *SMALL, *flags])


def _models(root) -> dict[str, set[str]]:
    cells = read_cells(storage.resolve(root / "fig10_k" / "results"))
    return {name: set(rows["model_id"]) for name, rows in cells.groupby("name")}


def test_a_finished_sweep_grows_by_seeds_grids_and_steps(ray_local, tmp_path, capsys):
    first = ["--set", "train.max_steps=10", "--grid", "cells:1-3x1-3"]
    assert _sweep(tmp_path, *first) == 0
    before = _models(tmp_path)
    assert len(before) == 2 and all(len(ids) == 1 for ids in before.values())
    cells_before = len(read_cells(storage.resolve(tmp_path / "fig10_k" / "results")))

    # more seeds and one more grid: two new trials; the kept ones neither retrain nor rescore
    assert _sweep(tmp_path, "--seeds", "2", "--set", "train.max_steps=10", "--grid",
                  "cells:1-3x1-3", "--grid", "cells:4x4") == 0
    assert "grows the sweep" in capsys.readouterr().err
    grown = _models(tmp_path)
    assert len(grown) == 4 and all(grown[n] == ids for n, ids in before.items())
    cells = read_cells(storage.resolve(tmp_path / "fig10_k" / "results"))
    assert len(cells) == cells_before + 2 * (9 + 1) + 2 * 1  # new trials: both grids; kept: 4x4
    assert not cells.duplicated(["model_id", "i", "j", "region"]).any()
    for run in (tmp_path / "fig10_k" / "train").iterdir():
        steps = [c.name for c in list_checkpoints(storage.resolve(run))]
        assert steps[-1] == "step-000000010", (run, steps)  # nothing trained past the budget

    # more steps: every trial continues from its checkpoint; its shorter model's rows move out
    assert _sweep(tmp_path, "--seeds", "2", "--set", "train.max_steps=15", "--grid",
                  "cells:1-3x1-3", "--grid", "cells:4x4") == 0
    longer = _models(tmp_path)
    assert len(longer) == 4 and all(len(ids) == 1 and ids != grown[n] for n, ids in longer.items())
    cells = read_cells(storage.resolve(tmp_path / "fig10_k" / "results"))
    assert set(cells["train.max_steps"]) == {15} and len(cells) == 4 * 10
    moved = read_cells(storage.resolve(tmp_path / "fig10_k" / "superseded"))
    assert set(moved["train.max_steps"]) == {10} and len(moved) == 4 * 10

    # anything else, or a trial left out: refused in one line before Ray runs anything
    assert _sweep(tmp_path, "--seeds", "1", "--set", "train.max_steps=15", "--grid",
                  "cells:1-3x1-3", "--grid", "cells:4x4") == 2
    assert "not in this run" in capsys.readouterr().err
