"""The main job through Ray Train: tiny Fig. 10 trials as TorchTrainers, resume, grid eval, eval-100plus."""

import json
import os
from pathlib import Path

import pytest

from abacus_ray.evaluation.results import read_cells
from abacus_ray.storage import on_disk

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.ray, pytest.mark.cost(58)]


def _fig10():
    from abacus_ray.api.sweeps import load_sweep

    return load_sweep(str(ROOT / "sweeps" / "fig10_k.py"))


ARGS = ["--preset", "tiny", "--max-trials", "2", "--set", "train.max_steps=20", "--set", "eval.per_cell=3",
        "--grid", "cells:1-3x1-3", "--no-dashboard"]


@pytest.fixture(scope="module")
def fig10_run(tmp_path_factory, ray_session):
    ray_session()
    from abacus_ray.cli.sweep import main

    storage = tmp_path_factory.mktemp("fig10")
    cwd = os.getcwd()
    try:
        assert main(_fig10(), [*ARGS, "--storage", str(storage)]) == 0
    finally:
        os.chdir(cwd)  # the driver moved into its storage (`api.checks.leave_working_dir`)
    return storage / "fig10_k"


def _models(root: Path) -> dict[str, str]:
    df = read_cells(on_disk(root / "results"))
    return dict(zip(df["run_id"], df["model_id"], strict=False))


def test_torch_trainer_trials_train_and_evaluate(fig10_run, ray_local):
    df = read_cells(on_disk(fig10_run / "results"))
    assert df["model_id"].nunique() == 2
    assert sorted(df["model.max_k"].unique()) == [1, 12]
    assert len(df) == 2 * 9 and set(df["region"]) == {"id"}
    assert df["trial_id"].notna().all()
    # the checkpoint each row came from is a Ray Train checkpoint of our format, 20 steps in
    for path in df["checkpoint"].unique():
        meta = json.loads((Path(path) / "meta.json").read_text())
        assert meta["step"] == 20
    # both Ray Data pools (the fake GPU slot's actor and a CPU actor) evaluated cells in this run
    pools = {w.split(":")[0] for w in df["worker"]}
    assert pools == {"gpu", "cpu"}


def test_rerun_resumes_without_retraining(fig10_run, ray_local, capsys):
    from abacus_ray.cli.sweep import main

    before = _models(fig10_run)
    parts = sorted((fig10_run / "results").glob("part-*.parquet"))
    assert main(_fig10(), [*ARGS, "--storage", str(fig10_run.parent)]) == 0
    assert _models(fig10_run) == before  # same trials, same checkpoint hashes
    assert sorted((fig10_run / "results").glob("part-*.parquet")) == parts  # nothing re-evaluated
    out, err = capsys.readouterr()
    assert "resuming" in err and "evaluated 0 cells" in err
    # the sweep ends with Fig. 10's verdict; its grid (1..3 square) holds no length past k = 1's positions
    conclusion = [line for line in out.splitlines() if line.startswith("Conclusion (Fig. 10): ")]
    assert len(conclusion) == 1 and ": not shown at this scale — i = j: " in conclusion[0]


def test_rerun_with_other_trials_is_refused(fig10_run, ray_local):
    from abacus_ray.cli.sweep import main

    rc = main(_fig10(), [*ARGS, "--storage", str(fig10_run.parent), "--set", "train.lr=0.01"])
    assert rc == 2


def test_eval_100plus_only_missing_cells(fig10_run, ray_local, capsys):
    from abacus_ray.cli import main as cli_main

    def main(args):
        return cli_main(["eval-all", *args])

    args = [str(fig10_run), "--grid", "diagonal:101-103", "--per-cell", "2"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "2 model(s), 6 cells evaluated, 0 already present" in first
    df = read_cells(on_disk(fig10_run / "results"))
    plus = df[df["region"] == "ood100plus"]
    assert sorted(plus["i"].unique()) == [101, 102, 103] and len(plus) == 6
    assert main(args) == 0
    assert "0 cells evaluated, 6 already present" in capsys.readouterr().out
