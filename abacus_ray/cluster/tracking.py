"""Experiment tracking through Ray Tune's own integrations: one run per trial.

`--tracking mlflow` (the default) attaches Ray's `MLflowLoggerCallback` to the sweep's Tuner with a
local SQLite store in the sweep's storage (`<sweep>/mlflow.db`: works offline, no server; MLflow 3
refuses plain-file stores; view it with `mlflow ui --backend-store-uri sqlite:///<sweep>/mlflow.db
--host 127.0.0.1`, which needs the full `mlflow` package). Ray's callback logs every reported
training metric and ends the run with the trial; ours adds two things to it:

* the full resolved `ExperimentConfig` as the run's params (Tune's config
holds only the swept values);
* each report's metrics in one batch, not one write per metric;
* a resumed sweep continues each trial's run instead of opening a second
one: Ray's callback keeps its
  trial -> run map in memory only, so after `Tuner.restore` it would start every run again. Runs are
  found by the `abacus_run` tag, the trial's run name. A trial whose config a grown sweep changed
  (more steps, more grids) gets a new run tagged `grown_from` the old one: MLflow's params cannot
  change, and the old run's still describe the model it tracked.

Metrics are the training loop's own (loss, lr, throughput, budget, validation scores); Tune's
bookkeeping
in each result (pid, timestamp, done, iteration counters) is left out. Each run gets its resolved
config as the artifact `config.json` when its trial starts; when the sweep's evaluation finishes,
`log_evaluation` adds the region means (ID / OOD / 100+), the checkpoint's path and the trial's cell
rows (`cells.parquet`, the results schema of docs/results-schema.md). Artifacts live beside the
store (`<sweep>/mlartifacts/`). A trial that errors (its workers killed by Ray's memory monitor,
say) ends FAILED; `close_runs` ends any run a stopped sweep left RUNNING. `--tracking wandb` uses
Ray's `WandbLoggerCallback` in W&B's offline mode (no account); `none` tracks nothing.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import mlflow
import pyarrow as pa
from mlflow.entities import Metric, Param
from ray.air.integrations.mlflow import MLflowLoggerCallback  # RAY: Tune's MLflow integration
from ray.tune.result import TIMESTEPS_TOTAL, TRAINING_ITERATION
from ray.tune.utils import flatten_dict

from abacus_ray import storage
from abacus_ray.config import ExperimentConfig
from abacus_ray.config.dicts import flatten
from abacus_ray.evaluation.aggregate import region_means
from abacus_ray.evaluation.results import read_cells
from abacus_ray.sweep_dir import SweepDir

TRACKERS = ("mlflow", "wandb", "none")
RUN_TAG = "abacus_run"
PARAMS_PER_BATCH = 100  # MLflow's limit per `log_batch`
GROWN_FROM_TAG = "grown_from"  # a grown sweep's trial (more steps or grids): the run it follows
# What a training report says about the run (`training.loop`); the rest of a
# Tune result is bookkeeping.
METRICS = ("step", "samples", "tokens", "loss", "lr", "batch_size", "tokens_per_s", "samples_per_s",
           "budget_fraction", "device_hours", "eta_s", "elapsed_s", "mfu")


def store_uri(root: Path | str) -> str:
    """The sweep's MLflow store: one SQLite file in `root`, written by the driver alone (Tune
    callbacks run there), or, when `root` is a URI (`sweep --tracking-uri http://HOST:PORT`), that
    MLflow server. SQLite cannot live in a bucket: with object storage `root` is a directory on the
    driver's disk (`abacus_ray.storage.driver_dir`)."""
    if isinstance(root, str) and "://" in root:
        return root
    return f"sqlite:///{(Path(root) / SweepDir.TRACKING_STORE).resolve()}"


def artifact_root(root: Path | str) -> str | None:
    """Where the runs' artifacts go: beside the store (MLflow's default, `./mlruns`, follows the
    cwd); a server keeps its own (None)."""
    if isinstance(root, str) and "://" in root:
        return None
    return (Path(root) / SweepDir.TRACKING_ARTIFACTS).resolve().as_uri()


def tracked(result: dict[str, Any]) -> dict[str, Any]:
    """The metrics worth a chart from one Tune result: the loop's reports and validation scores."""
    return {k: v for k, v in result.items() if k in METRICS or k.startswith("validation")}


class TrialRuns(MLflowLoggerCallback):
    """Ray's MLflow callback, with the full config as params and one run
    per trial across resumes."""

    def __init__(self, root: Path, experiment: str, configs: dict[str, ExperimentConfig]) -> None:
        super().__init__(store_uri(root), experiment_name=experiment)
        self.root = root
        self.configs = {name: cfg.to_dict() for name, cfg in configs.items()}
        self.params = {
            name: {k: str(v) for k, v in flatten(d).items()} for name, d in self.configs.items()
        }

    def setup(self, *args, **kwargs) -> None:
        """Create the experiment with its artifacts beside the store before
        Ray's callback looks it up."""
        client = mlflow.tracking.MlflowClient(tracking_uri=self.tracking_uri)
        if client.get_experiment_by_name(self.experiment_name) is None:
            client.create_experiment(
                self.experiment_name, artifact_location=artifact_root(self.root)
            )
        super().setup(*args, **kwargs)

    full_disk: OSError | None = None  # set when a write met a full disk: tracking stops there

    def _guarded(self, write: Callable[[], None]) -> None:
        """One write to the store; a full disk ends tracking for the sweep (the trials go on and
        say so themselves) instead of a traceback out of Tune at every report."""
        if self.full_disk is not None:
            return
        try:
            write()
        except Exception as e:
            self.full_disk = storage.disk_full(e)
            if self.full_disk is None:
                raise

    def log_trial_start(self, trial) -> None:
        self._guarded(lambda: self._start(trial))

    def log_trial_result(self, iteration: int, trial, result: dict) -> None:
        self._guarded(lambda: self._result(trial, result))

    def log_trial_end(self, trial, failed: bool = False) -> None:
        if trial in self._trial_runs:
            self._guarded(lambda: super(TrialRuns, self).log_trial_end(trial, failed))

    def _start(self, trial) -> None:
        name = trial.config["run"]
        mine = self.params.get(name, {})
        logged: dict[str, str] = {}
        client = self.mlflow_util._get_client()
        if trial not in self._trial_runs:
            found = self.mlflow_util._mlflow.search_runs(
                experiment_ids=[self.mlflow_util.experiment_id],
                filter_string=f"tags.{RUN_TAG} = '{name}'",
                output_format="list",
            )
            latest = found[0] if found else None  # MLflow lists the newest run first
            if latest is not None and all(mine.get(k) == v for k, v in latest.data.params.items()):
                # a resumed sweep (its params all logged, some, or none when a kill cut them short)
                self._trial_runs[trial] = latest.info.run_id
                client.update_run(latest.info.run_id, status="RUNNING")
                logged = latest.data.params
            else:  # a new trial, or one its grown sweep changed (params cannot change in MLflow)
                tags = {**self.tags, "trial_name": str(trial), RUN_TAG: name}
                if latest is not None:
                    tags[GROWN_FROM_TAG] = latest.info.run_id
                self._trial_runs[trial] = self.mlflow_util.start_run(
                    tags=tags, run_name=name
                ).info.run_id
        params = [Param(k, v) for k, v in mine.items() if logged.get(k) != v]
        for i in range(0, len(params), PARAMS_PER_BATCH):  # Ray's callback logs one param per write
            client.log_batch(self._trial_runs[trial], params=params[i:i + PARAMS_PER_BATCH])
        if name in self.configs:
            client.log_dict(self._trial_runs[trial], self.configs[name], "config.json")

    def _result(self, trial, result: dict) -> None:
        """Every reported metric in one batch: Ray's callback writes them one by one, one SQLite
        transaction each, which took 0.6 s per report on 2 busy cores (and Tune warned about it)."""
        step = result.get(TIMESTEPS_TOTAL) or result[TRAINING_ITERATION]
        metrics = self.mlflow_util._parse_dict(tracked(flatten_dict(result)))
        now = int(time.time() * 1000)
        self.mlflow_util._get_client().log_batch(
            self._trial_runs[trial],
            metrics=[Metric(k, float(v), now, step) for k, v in metrics.items()],
        )


def callbacks(
    tracking: str, root: Path, experiment: str, configs: dict[str, ExperimentConfig]
) -> list[Any]:
    """The Tune callbacks for `--tracking`."""
    if tracking not in TRACKERS:
        raise ValueError(f"--tracking: {tracking!r} is not one of {', '.join(TRACKERS)}")
    if tracking == "none":
        return []
    if tracking == "wandb":
        try:
            from ray.air.integrations.wandb import WandbLoggerCallback  # RAY: optional, needs wandb
        except ImportError:
            raise ValueError(
                "--tracking wandb: needs the wandb package (pip install wandb)"
            ) from None
        # no account, no network: runs land in the sweep's storage
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_DIR", str(root))
        return [WandbLoggerCallback(project=experiment, mode="offline")]
    _quiet_mlflow()
    return [TrialRuns(root, experiment, configs)]


def _quiet_mlflow() -> None:
    """MLflow's database set-up lines (INFO, one per new store) are not about the user's run."""
    for name in ("mlflow.store.db.utils", "alembic", "alembic.runtime.migration"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning, module="mlflow")


def log_evaluation(
    root: Path | str,
    experiment: str,
    finished: Sequence[tuple[Any, ExperimentConfig]],
    results: storage.Location,
) -> int:
    """Each finished trial's region means and checkpoint path (a URI on object storage) into its
    MLflow run, from the results directory `results`. Returns runs updated."""
    _quiet_mlflow()
    client = mlflow.tracking.MlflowClient(tracking_uri=store_uri(root))
    exp = client.get_experiment_by_name(experiment)
    if exp is None or not storage.exists(results):
        return 0
    cells = read_cells(results)
    updated = 0
    for source, cfg in finished:
        runs = client.search_runs(
            [exp.experiment_id], filter_string=f"tags.{RUN_TAG} = '{source.run_id}'"
        )
        mine = (
            cells[cells["run_id"] == source.run_id]
            if "run_id" in cells.columns
            else cells.iloc[0:0]
        )
        if not runs or mine.empty:
            continue
        run_id = runs[0].info.run_id
        for _, row in region_means(mine).iterrows():  # one row per view: id, ood, ood100plus, ...
            key = f"eval_{row['view']}" + ("" if row["recurrences"] == cfg.model.test_recurrences
                                          else f"_rec{row['recurrences']}")
            client.log_metric(run_id, key, float(row["accuracy"]))
        client.set_tag(run_id, "checkpoint", source.checkpoint)
        _log_cells(client, run_id, mine)
        updated += 1
    return updated


def _log_cells(client, run_id: str, cells) -> None:
    """The trial's cell rows as the run's `cells.parquet` artifact."""
    with tempfile.TemporaryDirectory(prefix="abacus-mlflow-") as tmp:
        path = Path(tmp) / "cells.parquet"
        table = pa.Table.from_pandas(cells, preserve_index=False)
        storage.write_parquet(storage.on_disk(path), table)
        client.log_artifact(run_id, str(path))


def _all_runs(client, experiment_id: str) -> list:
    """Every run of the experiment: MLflow answers a search one page (1,000 runs) at a time."""
    runs, token = [], None
    while True:
        page = client.search_runs([experiment_id], page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def close_runs(root: Path | str, experiment: str, outcome: dict[str, str]) -> int:
    """End the runs a sweep left RUNNING: FAILED for trials in `outcome` marked "failed" (and for
    any run of a trial the sweep never reported), KILLED for those marked "stopped". A run Tune
    ended FINISHED whose trial is marked "failed" (it diverged: its function returned) becomes
    FAILED too. Returns runs ended."""
    _quiet_mlflow()
    client = mlflow.tracking.MlflowClient(tracking_uri=store_uri(root))
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return 0
    ended = 0
    for run in _all_runs(client, exp.experiment_id):
        name = run.data.tags.get(RUN_TAG, "")
        state = outcome.get(name, "failed")
        if run.info.status == "RUNNING":
            end = state != "finished"
        else:  # ended by Tune: a diverged trial returned normally, yet it failed
            end = run.info.status != "FAILED" and outcome.get(name) == "failed"
        if end:
            client.set_terminated(
                run.info.run_id, status="KILLED" if state == "stopped" else "FAILED"
            )
            ended += 1
    return ended
