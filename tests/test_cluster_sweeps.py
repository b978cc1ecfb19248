"""Every sweep file runs with the tiny preset through Tune and Ray Data and writes its axes to Parquet.

Trials use `cluster.trainer=function` (the training loop inside the Tune trial) to keep 17 sweeps
affordable on CI; the TorchTrainer path is covered by `test_cluster_fig10.py` and the job test.
"""

import importlib.util
from pathlib import Path

import pytest

from abacus_ray.evaluation.results import read_cells

SWEEPS = sorted(Path(__file__).resolve().parents[1].glob("sweeps/*.py"))
pytestmark = pytest.mark.ray


def load_sweep(path: Path):
    spec = importlib.util.spec_from_file_location(f"sweep_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SWEEP


def test_every_figure_has_a_sweep_file():
    names = {p.stem for p in SWEEPS}
    for fig in ("fig3_embeddings", "fig4_depth_recurrence", "fig5_add_sub", "fig6_multiplication", "fig7_relative",
                "fig8_bitwise_or", "fig9_data_size", "fig10_k", "fig11_large_k", "fig15_recurrence_outputs",
                "fig16_no_mask", "fig18_effective_depth", "fig19_injection_throttle", "fig20_random_padding",
                "fig21_index_hints", "table1_sorting", "table2_sorting_arch"):
        assert fig in names


@pytest.mark.parametrize("path", SWEEPS, ids=[p.stem for p in SWEEPS])
def test_sweep_runs_tiny_and_writes_swept_columns(path, tmp_path, ray_local):
    from abacus_ray.cluster.sweep import main, swept_keys

    sweep = load_sweep(path)
    flags = ["--set", "train.max_steps=8", "--set", "eval.per_cell=2", "--set", "cluster.trainer=function"]
    rc = main(sweep, ["--preset", "tiny", "--storage", str(tmp_path), "--max-trials", "2", "--seeds", "1",
                      "--grid", "cells:1-2x1-2", "--no-dashboard", *flags])
    assert rc == 0
    trials = sweep.trials("tiny", seeds=1)[:2]
    df = read_cells(tmp_path / sweep.name / "results")
    assert df["model_id"].nunique() == len(trials)
    recurrences = sweep.eval_recurrences_for("tiny") or (None,)
    cells_per_model = df.groupby("model_id").size()
    assert (cells_per_model >= 4 * len(recurrences)).all()  # 2x2 cells (x tasks, x test-time recurrences)
    keys = swept_keys(trials) or list(trials[0])
    for key in keys:
        assert key in df.columns, key
    for key in keys:  # the swept values, exactly as the trials set them
        expected = {str(t[key]) for t in trials}
        assert {str(v) for v in df[key].unique()} == expected, key
