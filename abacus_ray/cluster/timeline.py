"""Where and when each trial ran: the sweep's `timeline.parquet`, one row per trial.

A trial puts its node (Ray's node id, of its rank-0 worker), the wall time it started and the
time of each report into its reports (`cluster/trial.py`); after Tune finishes, the driver writes
the last of them with the trial's requested resources as `{sweep}/timeline.parquet`. That is the
record the dashboard's "Timeline" view draws (trials per node over time) and from which a sweep's
use of its trial slots is read (docs/performance.md, "Many nodes"): on a cluster, where work went is
as much a result as the accuracy. Rerunning a sweep rewrites the file with the trials' latest runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pyarrow as pa

from abacus_ray.cluster.outcome import TrialOutcome
from abacus_ray.cluster.placement import worker_bundle
from abacus_ray.config import ExperimentConfig
from abacus_ray.evaluation.results import write_table
from abacus_ray.sweep_dir import SweepDir

SCHEMA = pa.schema([
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
    return write_table(dirs.timeline, pa.Table.from_pylist(rows, schema=SCHEMA))
