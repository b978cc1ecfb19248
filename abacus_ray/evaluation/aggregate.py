"""From cell rows to the paper's numbers: region means per model, spread over seeds, Wilson
intervals.

The paper reports, per model, the mean of per-cell exact-match accuracies over a region, every cell
weighted equally (docs/official-code.md §7.7), then the mean over training runs. Cell rows are
pandas DataFrames read by `results.read_cells`. Views (which cells a number averages) come from
`regions.views_for`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from abacus_ray.evaluation.regions import views_for

# Columns that identify one evaluated model under one set of eval settings.
MODEL_KEYS = ("model_id", "task", "per_cell", "eval_seed", "recurrences", "require_eos", "scoring")


def wilson_interval(k, n, z: float = 1.959963984540054):
    """Wilson score interval for k successes in n trials (95 % by default); vectorised over arrays.

    Unlike the normal approximation it stays inside [0, 1] and is sensible at k = 0 or k = n, which
    is where most grid cells are.
    """
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    if np.any(n <= 0):
        raise ValueError("n: every trial count must be >= 1")
    if np.any((k < 0) | (k > n)):
        raise ValueError("k: successes must lie in 0..n")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # exact ends (rounding would leave 1 - 1e-16)
    lo = np.where(k == 0, 0.0, np.clip(centre - half, 0, 1))
    hi = np.where(k == n, 1.0, np.clip(centre + half, 0, 1))
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


def with_intervals(cells: pd.DataFrame) -> pd.DataFrame:
    """`cells` plus `acc_lo`, `acc_hi`: the Wilson 95 % interval of each cell's accuracy."""
    lo, hi = wilson_interval(cells["n_correct"].to_numpy(), cells["n"].to_numpy())
    return cells.assign(acc_lo=np.atleast_1d(lo), acc_hi=np.atleast_1d(hi))


def view_mask(cells: pd.DataFrame, task: str, view: str) -> pd.Series:
    pred = views_for(task)[view]
    rows = zip(cells["region"], cells["i"], cells["j"], strict=True)
    return pd.Series([pred(r, i, j) for r, i, j in rows], index=cells.index, dtype=bool)


def region_means(cells: pd.DataFrame, extra_keys: Sequence[str] = ()) -> pd.DataFrame:
    """One row per (model, eval settings, view): mean cell accuracy, number of cells, problems.

    `extra_keys` are config columns to carry along (e.g. `model.positions`, `seed`); they must be
    constant per model.
    """
    if cells.empty:
        raise ValueError("cells: no result rows to aggregate")
    keys = ([k for k in MODEL_KEYS if k in cells.columns]
            + [k for k in extra_keys if k in cells.columns])
    out = []
    for key, group in cells.groupby(keys, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        task = group["task"].iloc[0]
        for view in views_for(task):
            sel = group[view_mask(group, task, view)]
            if sel.empty:
                continue
            out.append(dict(zip(keys, key, strict=True)) | {
                "view": view, "accuracy": float(sel["accuracy"].mean()), "cells": int(len(sel)),
                "problems": int(sel["n"].sum()), "n_correct": int(sel["n_correct"].sum()),
                "first_accuracy": float((sel["n_first_correct"] / sel["n"]).mean())})
    return pd.DataFrame(out)


def seed_spread(means: pd.DataFrame, group_by: Sequence[str]) -> pd.DataFrame:
    """Mean and spread (std, min, max) of view means over models that share `group_by` (e.g. every
    config column but `seed`): the paper's "mean over 3 runs".

    `means` is `region_means(..., extra_keys=group_by)`. std is the sample std (ddof=1), NaN for one
    run.
    """
    missing = [g for g in group_by if g not in means.columns]
    if missing:
        raise ValueError(f"group_by: {missing[0]!r} is not a column of the region means")
    keys = list(group_by) + ["task", "view"]
    keys = list(dict.fromkeys(keys))
    g = means.groupby(keys, dropna=False, sort=True)["accuracy"]
    out = g.agg(mean="mean", std="std", min="min", max="max", runs="count").reset_index()
    return out


def summary_table(cells: pd.DataFrame,
                  label_columns: Sequence[str] = ("name", "model.positions")) -> pd.DataFrame:
    """Wide table for `abacus-ray summary`: one row per model and eval settings, one column per
    view (%)."""
    means = region_means(cells, extra_keys=label_columns)
    index = [k for k in ("model_id", *label_columns, "task", "recurrences", "eval_seed", "per_cell")
             if k in means.columns]
    wide = (means.groupby([*index, "view"], dropna=False, sort=True)["accuracy"].first()
            .unstack("view"))
    counts = means.groupby(index, dropna=False)["cells"].sum().rename("cells")
    wide = (100 * wide).join(counts)
    order = [v for task in sorted(set(means["task"])) for v in views_for(task) if v in wide.columns]
    return wide[list(dict.fromkeys(order)) + ["cells"]].reset_index()


def diagonal_reach(cells: pd.DataFrame, threshold: float = 0.9) -> pd.DataFrame:
    """Per model and eval settings, on the i = j diagonal (Fig. 10): `reach` = the longest length
    with accuracy >= `threshold`, and `zero_from` = the shortest length from which every evaluated
    longer diagonal cell is at 0 % (None if the last one is not). Models without diagonal cells get
    neither."""
    keys = [k for k in MODEL_KEYS if k in cells.columns]
    diag = cells[cells["i"] == cells["j"]].sort_values("i")
    rows = []
    for key, g in diag.groupby(keys, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        n, acc = g["i"].to_numpy(), g["accuracy"].to_numpy()
        good = n[acc >= threshold]
        nonzero = n[acc > 0]
        zero_from = (None if acc[-1] > 0
                     else int(nonzero.max() + 1) if len(nonzero) else int(n.min()))
        rows.append(dict(zip(keys, key, strict=True)) | {
            "reach": int(good.max()) if len(good) else None, "zero_from": zero_from})
    return pd.DataFrame(rows, columns=[*keys, "reach", "zero_from"])


def reach_over_seeds(cells: pd.DataFrame, group_by: Sequence[str],
                     threshold: float = 0.9) -> pd.DataFrame:
    """The diagonal's reach (`diagonal_reach`) over the training seeds of models that share
    `group_by`: min, median and max of each model's reach (a model with no length at `threshold`
    counts as 0), never the best seed's alone, since length generalisation moves with the seed."""
    reach = diagonal_reach(cells, threshold)
    group_by = [g for g in group_by if g in cells.columns and g not in reach.columns]
    labels = cells[["model_id", *group_by]].drop_duplicates("model_id")
    merged = reach.merge(labels, on="model_id", how="left")
    merged["reach"] = merged["reach"].fillna(0).astype(int)
    keys = [*group_by, *(k for k in MODEL_KEYS if k in reach.columns and k != "model_id")]
    g = merged.groupby(keys, dropna=False, sort=True)["reach"]
    return g.agg(reach_min="min", reach_median="median", reach_max="max",
                 runs="count").reset_index()


def format_table(df: pd.DataFrame, short_id: int = 12) -> str:
    """Plain-text table; accuracies to one decimal, model ids shortened."""
    df = df.copy()
    if "model_id" in df.columns:
        df["model_id"] = df["model_id"].str.slice(0, short_id)
    cols = list(df.columns)
    cells = [[_fmt(v) for v in row] for row in df.itertuples(index=False)]
    heads = [printable(str(c)) for c in cols]
    widths = [max(len(h), *(len(r[k]) for r in cells)) if cells else len(h)
              for k, h in enumerate(heads)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def printable(text: str) -> str:
    """`text` with every character a terminal would act on (control, format, line separators)
    escaped: a name read back from a results file is shown, never run (an escape sequence, a bidi
    override)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _fmt(v) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.1f}"
    return printable(str(v))
