"""What became of a sweep's trials, read from Tune's result grid once.

Tune hands back a `ResultGrid`: per trial, its last metrics, its error, its checkpoint and its
report history, in Tune's own shapes. `outcomes` reads them here, once, into one `TrialOutcome`
per trial (a point Tune ran twice is one outcome), deciding each trial's status
(`trial_status.status`); the trial record, the search table, the timeline, the closing line and
the evaluation all read that list (`Outcome`), never the grid.

Where and when each trial ran is one of those views, the sweep's `timeline.parquet` (one row per
trial): a trial puts its node (Ray's node id, of its rank-0 worker), the wall time it started and
the time of each report into its reports (`cluster/trial.py`), and the driver writes the last of
them with the trial's requested resources. The dashboard's "Timeline" view draws it (trials per node
over time), and a sweep's use of its trial slots is read from it (docs/performance.md, "Many
nodes"): on a cluster, where work went is as much a result as the accuracy. Rerunning a sweep
rewrites it with the trials' latest runs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from ray.tune import ResultGrid

from abacus_ray import trial_status
from abacus_ray.cluster.placement import worker_bundle
from abacus_ray.cluster.trial import run_name as trial_run_name
from abacus_ray.config import ExperimentConfig
from abacus_ray.evaluation.results import write_table
from abacus_ray.evaluation.work import Source
from abacus_ray.model.checkpoint import latest_checkpoint
from abacus_ray.storage import Location
from abacus_ray.sweep_dir import SweepDir
from abacus_ray.text import shorten

DISK_FULL = "disk full"  # how the reason of a trial that met a full disk starts

TIMELINE_SCHEMA = pa.schema([  # `{sweep}/timeline.parquet`: where and when each trial ran
    ("run", pa.string()),  # the trial's run name, e.g. fig10_k/max_k=25_seed=0
    ("trial_id", pa.string()),
    ("node_id", pa.string()),  # Ray's node id (hex) of the trial's rank-0 worker
    ("pid", pa.int64()),  # the trial's process (Tune's trial actor; a TorchTrainer trial's driver)
    ("workers", pa.int64()),
    ("resources", pa.string()),  # one worker's bundle as JSON, e.g. {"CPU": 1.0, "h100": 1.0}
    ("trainer", pa.string()),
    # Unix seconds: the trial's function began (its last session, after a resume)
    ("start_s", pa.float64()),
    ("end_s", pa.float64()),  # Unix seconds of its last report
    ("status", pa.string()),  # finished | stopped | diverged | error (`abacus_ray.trial_status`)
])


def failure_reason(error: BaseException) -> str:
    """A trial's error in a few words: its type and first line (Ray's memory
    monitor: OutOfMemoryError)."""
    first = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    cause = error.__cause__ or error.__context__
    kind = (
        type(cause).__name__
        if type(error).__name__ in ("TuneError", "RayTaskError") and cause
        else type(error).__name__
    )
    return f"{kind}: {shorten(first, 100)}" if first else kind


@dataclasses.dataclass(frozen=True)
class TrialOutcome:
    """What became of one trial, read from Tune's results once (`outcomes`): its status
    (`trial_status`), why it failed, its last step and checkpoint, its last report and, for a
    search, every report (the search table's history)."""

    run: str
    trial_id: str | None
    status: str
    reason: str | None
    step: int | None
    checkpoint: Location | None
    last: dict[str, Any]
    reports: tuple[dict[str, Any], ...] = ()

    @property
    def scored(self) -> bool:
        """Only a finished trial is scored: an interrupted sweep returns running trials too, and
        a diverged one's last checkpoint predates its failure."""
        return self.status == trial_status.FINISHED and self.checkpoint is not None


def _checkpoint_of(result, root: Location, run: str) -> Location | None:
    """A trial's last reported checkpoint, else its Train run's newest (None if it has none)."""
    metrics = result.metrics or {}
    path = metrics.get("checkpoint_path")  # a TorchTrainer's last reported one (a path in `fs`)
    if path is None and result.checkpoint is not None:  # `function` trials: Tune's own checkpoint
        path = result.checkpoint.path
    if path is not None:
        return root.at(path)  # its URI on an object store: what the evaluators and MLflow get
    if metrics.get("trial_id"):  # fall back to the Train run's newest checkpoint in storage
        return latest_checkpoint(SweepDir.of(root).train_run(run, metrics["trial_id"]))
    return None


def _reason(status: str, metrics: dict[str, Any], error: BaseException | None) -> str | None:
    if status == trial_status.DIVERGED:  # the loop stopped it, its weights spoiled: not scored
        return f"{trial_status.DIVERGED} at step {metrics['diverged_at_step']}"
    if status == trial_status.ERROR:
        return (f"{DISK_FULL}: {metrics['disk_full']}" if metrics.get("disk_full")
                else failure_reason(error))
    return None


def outcomes(grid: ResultGrid, root: Location, *,
             history: bool = False) -> list[TrialOutcome]:
    """RAY: Tune's result grid as one outcome per trial, in run-name order: the one place Tune's
    results are read, and each trial's status decided (`trial_status.status`). `history`: keep
    every report too (a search's table).

    A point is one outcome even if Tune ran it twice: a driver killed between Tune's experiment
    snapshot (which already held a new PENDING trial) and its searcher's snapshot gets that point
    again from the restored searcher, under the same trial id (seen in test_faults' driver kill);
    its finished run counts, else its last."""
    found: dict[str, TrialOutcome] = {}
    for result in grid:
        run = trial_run_name(result)
        if run in found and found[run].status == trial_status.FINISHED:
            continue
        metrics = dict(result.metrics or {})
        status = trial_status.status(metrics, errored=result.error is not None)
        step = metrics.get("step")
        step = int(step) if isinstance(step, (int, float)) and step == step else None
        reports: tuple[dict[str, Any], ...] = ()
        if history:
            frame = result.metrics_dataframe
            reports = tuple(frame.to_dict("records")) if frame is not None and len(frame) \
                else (metrics,)
        found[run] = TrialOutcome(run, metrics.get("trial_id"), status,
                                  _reason(status, metrics, result.error), step,
                                  _checkpoint_of(result, root, run), metrics, reports)
    return [found[run] for run in sorted(found)]


@dataclasses.dataclass
class Outcome:
    """What became of the sweep's trials (`outcomes`), and the views of it the driver hands on."""

    trials: list[TrialOutcome]
    by_name: dict[str, ExperimentConfig]
    root: Location

    @property
    def finished(self) -> dict[str, tuple[Source, ExperimentConfig]]:
        """Run name -> final checkpoint and config, of the trials to score."""
        return {o.run: (Source(o.checkpoint.uri, run_id=o.run, trial_id=o.trial_id),
                        self.by_name[o.run]) for o in self.trials if o.scored}

    @property
    def statuses(self) -> dict[str, str]:
        return {o.run: o.status for o in self.trials}

    @property
    def reasons(self) -> dict[str, str]:
        """Run name -> why an errored or diverged trial failed."""
        return {o.run: o.reason for o in self.trials if o.reason is not None}

    @property
    def record(self) -> list[dict[str, Any]]:
        """The trial record's rows (`trial_status.RECORD_SCHEMA`)."""
        return [{"run": o.run, "trial_id": o.trial_id, "status": o.status, "reason": o.reason,
                 "checkpoint": o.checkpoint and trial_status.relative_checkpoint(
                     o.checkpoint.path, self.root.path), "step": o.step} for o in self.trials]

    def having(self, *statuses: str) -> list[str]:
        """The trials, not scored, whose status is one of `statuses`."""
        return sorted(o.run for o in self.trials if o.status in statuses and not o.scored)


def timeline_rows(trials: Sequence[TrialOutcome],
                  configs: Mapping[str, ExperimentConfig]) -> list[dict]:
    """One row per trial that reported at least once, from its last report."""
    rows = []
    for o in trials:
        m = o.last
        if "node_id" not in m:
            continue
        cl = configs[o.run].cluster
        rows.append({"run": o.run, "trial_id": str(m.get("trial_id", "")), "node_id": m["node_id"],
                     "pid": int(m["pid"]) if m.get("pid") is not None else None,
                     "workers": cl.workers,
                     "resources": json.dumps(worker_bundle(cl), sort_keys=True),
                     "trainer": cl.trainer, "start_s": float(m["started_at"]),
                     "end_s": float(m["reported_at"]), "status": o.status})
    return rows


def write_timeline(dirs: SweepDir, trials: Sequence[TrialOutcome],
                   configs: Mapping[str, ExperimentConfig]):
    """Write (replace) the sweep's timeline atomically; returns its location, or None if no trial
    reported."""
    rows = timeline_rows(trials, configs)
    if not rows:
        return None
    return write_table(dirs.timeline, pa.Table.from_pylist(rows, schema=TIMELINE_SCHEMA))
