"""The main job through Ray Train: tiny Fig. 10 trials as TorchTrainers, resume, grid eval, eval-100plus,
a trial trained again outside Ray from its config, and the finished sweep grown by seeds, grids and steps.

One sweep serves the module, its tests in order: each later one starts from what the earlier left.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pace import deadline

from abacus_ray import storage
from abacus_ray.evaluation.results import read_cells
from abacus_ray.model.checkpoint import list_checkpoints
from abacus_ray.storage import on_disk

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.ray, pytest.mark.cost(90)]


def _fig10():
    from abacus_ray.api.sweeps import load_sweep

    return load_sweep(str(ROOT / "sweeps" / "fig10_k.py"))


ARGS = ["--preset", "tiny", "--max-trials", "2", "--set", "train.max_steps=20", "--set", "eval.per_cell=3",
        "--grid", "cells:1-3x1-3", "--no-dashboard"]


@pytest.fixture(scope="module")
def fig10_run(tmp_path_factory, ray_session):
    ray_session()
    from abacus_ray.cli.sweep import main

    root = tmp_path_factory.mktemp("fig10")
    cwd = os.getcwd()
    try:
        assert main(_fig10(), [*ARGS, "--storage", str(root)]) == 0
    finally:
        os.chdir(cwd)  # the driver moved into its storage (`api.checks.leave_working_dir`)
    return root / "fig10_k"


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


def test_train_given_a_trials_config_and_threads_trains_that_trials_model(fig10_run, tmp_path):
    """`train --config TRIAL --threads 1` trains the sweep trial's model again outside Ray; two threads
    sum in another order and train another model (the default, the idle CPUs, is 1 on a busy machine)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs to differ from 1 thread")
    trial = sorted((fig10_run / "train").glob("*/step-000000020"))[0]
    meta = json.loads((trial / "meta.json").read_text())
    assert meta["threads"] == 1  # a Train worker of 1 CPU: Ray's OMP_NUM_THREADS
    ids = {}
    for threads in ("1", "2"):
        done = subprocess.run([sys.executable, "-m", "abacus_ray.cli", "train", "--config", str(trial),
                               "--out", str(tmp_path / f"again-{threads}"), "--threads", threads],
                              cwd=tmp_path, capture_output=True, text=True, timeout=deadline(300))
        assert done.returncode == 0, done.stderr
        ids[threads] = done.stdout.split("model_id: ")[1].strip()
    assert ids["1"] == meta["model_id"] and ids["2"] != meta["model_id"]


def _grow(root: Path, *flags: str) -> int:
    from abacus_ray.cli.sweep import main

    return main(_fig10(), ["--preset", "tiny", "--set", "eval.per_cell=3", "--no-dashboard", "--storage",
                           str(root.parent), *flags])


def _grid_rows(root: Path, table: str = "results"):
    cells = read_cells(storage.resolve(root / table))
    return cells[cells["region"] != "ood100plus"]  # eval-100plus's rows above are not the sweep's grid


@pytest.mark.scenario
@pytest.mark.cost(310)  # with the module's sweep
def test_a_finished_sweep_grows_by_seeds_grids_and_steps(fig10_run, ray_local, capsys):
    """Only what is missing runs: the kept trials' models stay (their Train runs end at once), the new
    trials train, only missing cells are scored, and models trained further replace their shorter
    selves in the results (whose rows move to `superseded/`)."""
    before = _grid_rows(fig10_run).groupby("name")["model_id"].agg(set).to_dict()
    assert len(before) == 2 and all(len(ids) == 1 for ids in before.values())
    rows_before = len(_grid_rows(fig10_run))

    # more seeds and one more grid: two new trials; the kept ones neither retrain nor rescore
    grids = ["--grid", "cells:1-3x1-3", "--grid", "cells:4x4"]
    assert _grow(fig10_run, "--seeds", "2", "--set", "train.max_steps=20", *grids) == 0
    assert "grows the sweep" in capsys.readouterr().err
    cells = _grid_rows(fig10_run)
    grown = cells.groupby("name")["model_id"].agg(set).to_dict()
    assert len(grown) == 4 and all(grown[n] == ids for n, ids in before.items())
    assert len(cells) == rows_before + 2 * (9 + 1) + 2 * 1  # new trials: both grids; kept: 4x4
    assert not cells.duplicated(["model_id", "i", "j", "region"]).any()
    for run in (fig10_run / "train").iterdir():
        steps = [c.name for c in list_checkpoints(storage.resolve(run))]
        assert steps[-1] == "step-000000020", (run, steps)  # nothing trained past the budget

    # more steps: every trial continues from its checkpoint; its shorter model's rows move out
    assert _grow(fig10_run, "--seeds", "2", "--set", "train.max_steps=25", *grids) == 0
    cells = _grid_rows(fig10_run)
    longer = cells.groupby("name")["model_id"].agg(set).to_dict()
    assert len(longer) == 4 and all(len(ids) == 1 and ids != grown[n] for n, ids in longer.items())
    assert set(cells["train.max_steps"]) == {25} and len(cells) == 4 * 10
    moved = _grid_rows(fig10_run, "superseded")
    assert set(moved["train.max_steps"]) == {20} and len(moved) == 4 * 10

    # tracked (MLflow, the default): each grown trial's config in a new run tagged with the run it follows
    import mlflow

    from abacus_ray.cluster.tracking import GROWN_FROM_TAG, RUN_TAG

    client = mlflow.tracking.MlflowClient(f"sqlite:///{fig10_run / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("fig10_k").experiment_id])
    by_trial: dict[str, list] = {}
    for run in runs:
        by_trial.setdefault(run.data.tags[RUN_TAG], []).append(run)
    assert sorted(len(r) for r in by_trial.values()) == [2, 2, 3, 3]  # kept: 20, 20 + a grid, 25 steps
    for chain in by_trial.values():
        newest = max(chain, key=lambda r: r.info.start_time)
        assert newest.data.params["train.max_steps"] == "25" and newest.info.status == "FINISHED"
        assert {r.data.tags.get(GROWN_FROM_TAG) for r in chain} - {None} <= {r.info.run_id for r in chain}

    # anything else, or a trial left out: refused in one line before Ray runs anything
    assert _grow(fig10_run, "--seeds", "1", "--set", "train.max_steps=25", *grids) == 2
    assert "not in this run" in capsys.readouterr().err
