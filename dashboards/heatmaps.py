"""Accuracy heatmaps (paper Figs. 1, 6, 7, 12-14; docs/official-code.md §8.1): the
cell data behind each plot.

One grid per entry (one model under one set of eval settings) and one per seed group. The seed-mean
grid averages the runs' accuracies cell by cell, as the paper's mean heatmaps do
(docs/official-code.md §7.7); its 95 % interval is the Wilson interval of the pooled counts. Drawing
(orientation: operand one down, operand two across; fixed 0-100 colour scale; the red
in-distribution square) happens in the browser from these arrays, see `static/dashboard.js`. A
model's grid also carries its error analysis per cell, for the "Errors in a cell" view.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from abacus_ray.evaluation.aggregate import wilson_interval, with_intervals


def _pct(x) -> list[float | None]:
    """Fractions -> percentages to 0.01; missing values (an older part without a column) -> None."""
    return [None if np.isnan(v) else round(float(v) * 100, 2) for v in np.asarray(x, dtype=float)]


def _grid(
    i, j, acc, n, c, lo, hi, first=None, first_lo=None, first_hi=None, runs=None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "i": [int(v) for v in i],
        "j": [int(v) for v in j],
        "acc": _pct(acc),
        "n": [int(v) for v in n],
        "c": [int(v) for v in c],
        "lo": _pct(lo),
        "hi": _pct(hi),
    }
    if first is not None:
        out.update(first=_pct(first), first_lo=_pct(first_lo), first_hi=_pct(first_hi))
    if runs is not None:
        out["runs"] = [int(v) for v in runs]
    return out


def entry_grids(cells: pd.DataFrame, with_first: bool = False) -> dict[int, dict[str, Any]]:
    """Per-entry cell arrays: i, j, accuracy %, n, n_correct and the Wilson 95 % interval (%)."""
    out = {}
    cells = with_intervals(cells.sort_values(["entry", "i", "j"]))
    for entry, g in cells.groupby("entry", sort=True):
        extra = {}
        if with_first:
            flo, fhi = wilson_interval(g["n_first_correct"].to_numpy(), g["n"].to_numpy())
            extra = {"first": g["n_first_correct"] / g["n"], "first_lo": np.atleast_1d(flo),
                     "first_hi": np.atleast_1d(fhi)}
        out[int(entry)] = _grid(
            g["i"], g["j"], g["accuracy"], g["n"], g["n_correct"], g["acc_lo"], g["acc_hi"], **extra
        )
        errors = error_arrays(g)
        if errors is not None:
            out[int(entry)]["errors"] = errors
    return out


def error_arrays(g: pd.DataFrame) -> dict[str, list] | None:
    """A model's wrong answers per cell (evaluation/errors.py): class counts, where answers first go
    wrong (counts per answer position) and one example; None for results written before schema 2."""
    if "n_carry_errors" not in g.columns or g["n_carry_errors"].isna().all():
        return None

    def ints(col: str) -> list[int | None]:
        return [None if pd.isna(v) else int(v) for v in g[col]]

    positions = [json.loads(v) if isinstance(v, str) else None for v in g["first_wrong_counts"]]
    examples = [v if isinstance(v, str) else None for v in g["error_example"]]
    return {
        "carry": ints("n_carry_errors"),
        "length": ints("n_length_errors"),
        "other": ints("n_other_errors"),
        "positions": positions,
        "example": examples,
    }


def group_grids(cells: pd.DataFrame, with_first: bool = False) -> dict[int, dict[str, Any]]:
    """Per-seed-group cell arrays: the cell-by-cell mean over runs, pooled
    counts and their interval."""
    cells = cells.assign(first_acc=cells["n_first_correct"] / cells["n"])
    agg = (
        cells.groupby(["group", "i", "j"], sort=True)
        .agg(
            acc=("accuracy", "mean"),
            first=("first_acc", "mean"),
            n=("n", "sum"),
            c=("n_correct", "sum"),
            f=("n_first_correct", "sum"),
            runs=("entry", "nunique"),
        )
        .reset_index()
    )
    out = {}
    for group, g in agg.groupby("group", sort=True):
        lo, hi = wilson_interval(g["c"].to_numpy(), g["n"].to_numpy())
        extra = {}
        if with_first:
            flo, fhi = wilson_interval(g["f"].to_numpy(), g["n"].to_numpy())
            extra = {
                "first": g["first"],
                "first_lo": np.atleast_1d(flo),
                "first_hi": np.atleast_1d(fhi),
            }
        out[int(group)] = _grid(
            g["i"],
            g["j"],
            g["acc"],
            g["n"],
            g["c"],
            np.atleast_1d(lo),
            np.atleast_1d(hi),
            runs=g["runs"],
            **extra,
        )
    return out
