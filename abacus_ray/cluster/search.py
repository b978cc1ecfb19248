"""A sweep's search on Ray Tune: the ASHA scheduler over the validation score, and the search's
own table.

`abacus_ray.sweep.Search` says which points run (a seeded random sample of the cross product) and
how they are ranked; here Tune's `ASHAScheduler` stops the weaker trials at step rungs, and the
finished search is written to `{sweep}/search.parquet`: one row per validation score of every trial
(its step, its value, the loss of the report that first carried it), with the trial's status
(`abacus_ray.trial_status`: `finished`, `stopped` by ASHA, `diverged`, `error`), its swept values
and its best and last validation score. The dashboard's "Search" view and `--confirm` read that file
(docs/results-schema.md, "search.parquet").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
from ray.tune.schedulers import ASHAScheduler

from abacus_ray.cluster.outcome import TrialOutcome
from abacus_ray.evaluation.results import write_table
from abacus_ray.storage import Location
from abacus_ray.sweep import Search, Trial
from abacus_ray.sweep_dir import SweepDir


def scheduler(search: Search, trials: Sequence[Trial]) -> ASHAScheduler:
    """RAY: Tune's asynchronous successive halving on the reported `step`; a trial that reaches its
    own budget ends normally (stop_last_trials=False), so it keeps its final
    checkpoint and report."""
    steps = [t.config.train.max_steps for t in trials]
    if any(s is None for s in steps):
        raise ValueError("train.max_steps: a search ranks trials at step rungs; give every "
                         "trial a steps budget")
    return ASHAScheduler(
        time_attr="step",
        metric=search.metric,
        mode="max",
        max_t=max(steps),
        grace_period=search.grace_steps,
        reduction_factor=search.reduction,
        stop_last_trials=False,
    )


def search_rows(outcomes: Sequence[TrialOutcome], trials: Sequence[Trial],
                metric: str) -> list[dict[str, Any]]:
    """One row per validation score of every trial, at the step it was scored (a trial without
    reports gives one row of its status)."""
    params = {t.name: t.params for t in trials}
    rows = []
    for o in outcomes:
        reports = o.reports or (o.last,)
        scores = [v for v in (_float(r.get(metric)) for r in reports) if v is not None]
        base = {"run": o.run, "trial_id": o.trial_id, "status": o.status,
                "params": json.dumps(params.get(o.run, {}), sort_keys=True),
                "best": max(scores) if scores else None, "last": scores[-1] if scores else None}
        seen = set()
        # a validation's numbers ride on every later report: keep each once, at its step
        for r in reports:
            step = _int(r.get("validation_step", r.get("probe_step", r.get("step"))))
            if step in seen:
                continue
            seen.add(step)
            rows.append({**base, "step": step, "metric": _float(r.get(metric)),
                         "loss": _float(r.get("loss")), "elapsed_s": _float(r.get("elapsed_s"))})
    return rows


SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("trial_id", pa.string()),
        ("status", pa.string()),
        ("params", pa.string()),
        ("best", pa.float64()),
        ("last", pa.float64()),
        ("step", pa.int64()),
        ("metric", pa.float64()),
        ("loss", pa.float64()),
        ("elapsed_s", pa.float64()),
    ]
)


def write_search_rows(root: Location, rows: Sequence[dict[str, Any]], metric: str) -> Location:
    """Write (replace) `{root}/search.parquet` from `search_rows`-shaped rows, atomically."""
    table = pa.Table.from_pylist(list(rows), schema=SCHEMA).replace_schema_metadata(
        {"metric": metric}
    )
    return write_table(root / SweepDir.SEARCH, table)


def write_search(root: Location, outcomes: Sequence[TrialOutcome], trials: Sequence[Trial],
                 search: Search) -> Location:
    """The finished (or interrupted) search's reports as
    `{root}/search.parquet`; returns its path."""
    return write_search_rows(root, search_rows(outcomes, trials, search.metric), search.metric)


def _float(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def _int(v: Any) -> int | None:
    return None if v is None or pd.isna(v) else int(v)
