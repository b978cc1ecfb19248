"""The "Search" view of a sweep page: what a sweep's search tried, what ASHA
stopped, the best so far.

A searching sweep (`abacus_ray/figures/extrapolation_10x.py`) leaves `search.parquet` beside its
`results/` (written by `abacus_ray/cluster/search.py`: one row per validation score of every trial,
with the trial's status and swept values). The page draws each trial's validation score over
optimiser steps (trials that did not finish dotted), the best validation score over the trials
tried, and a table of every configuration.
"""

from __future__ import annotations

import html
import json
from typing import Any

import pandas as pd

from abacus_ray import trial_status
from dashboards.data import sweep_table
from dashboards.html import Raw, fmt_int, fmt_pct, table


def load_search(cells: pd.DataFrame) -> pd.DataFrame | None:
    """The search reports of the sweep whose cells these are, or None when it ran no search."""
    return sweep_table(cells, lambda sweep: sweep.search)


def _short(run: str) -> str:
    return run.split("/", 1)[-1]


def search_payload(reports: pd.DataFrame | None) -> dict[str, Any]:
    """Per trial its validation curve (%), status and best; the running best over
    trials in the order tried."""
    if reports is None or reports.empty:
        return {"trials": [], "best_so_far": []}
    trials, best, running = [], [], None
    for run, rows in reports.groupby("run", sort=False):
        rows = rows.dropna(subset=["step"]).sort_values("step")
        first = rows.iloc[0] if len(rows) else reports[reports["run"] == run].iloc[0]
        trials.append(
            {
                "run": _short(run),
                "status": first["status"],
                "x": [int(s) for s in rows["step"]],
                "y": [None if pd.isna(v) else 100 * float(v) for v in rows["metric"]],
            }
        )
        if not pd.isna(first["best"]):
            running = max(running or 0.0, 100 * float(first["best"]))
        best.append({"trial": len(trials), "run": _short(run), "best": running})
    return {"trials": trials, "best_so_far": best}


def search_table(reports: pd.DataFrame) -> Raw:
    """One row per configuration tried, the best last validation first."""
    per_trial = (
        reports.groupby("run", sort=False)
        .agg(
            status=("status", "first"),
            params=("params", "first"),
            steps=("step", "max"),
            best=("best", "first"),
            last=("last", "first"),
        )
        .reset_index()
    )
    per_trial = per_trial.sort_values("last", ascending=False, na_position="last")
    keys: list[str] = []
    for p in per_trial["params"]:
        keys += [k for k in json.loads(p) if k not in keys]
    rows = []
    for r in per_trial.to_dict("records"):
        params = json.loads(r["params"])
        rows.append(
            [
                _short(r["run"]),
                r["status"],
                fmt_int(r["steps"]),
                fmt_pct(None if pd.isna(r["best"]) else 100 * r["best"]),
                fmt_pct(None if pd.isna(r["last"]) else 100 * r["last"]),
                *[params.get(k) for k in keys],
            ]
        )
    cols = ["Trial", "Status", "Steps", "Best validation %", "Last validation %", *keys]
    return table(cols, rows, numeric=[False, False, True, True, True] + [False] * len(keys))


def search_section(reports: pd.DataFrame | None, metric: str = "validation") -> list[Any]:
    """The page section (empty without a search)."""
    if reports is None or reports.empty:
        return []
    statuses = [str(s) for s in reports.groupby("run")["status"].first()]
    summary = html.escape(trial_status.counts(statuses))
    return [
        '<section id="search-section"><h2>Search</h2><p class=muted>'
        f"{reports['run'].nunique()} configurations tried ({summary}). Each line is one trial's "
        f"{metric} (exact match on long diagonal cells of a validation set) over optimiser steps; "
        "dotted lines are trials that did not finish (stopped early by Tune's ASHA scheduler, "
        "diverged or failed). Right: the best validation score over the trials tried.</p>"
        '<div class="pair"><div id="search" class="plot"></div>'
        '<div id="search-best" class="plot"></div></div>',
        search_table(reports),
        "</section>",
    ]
