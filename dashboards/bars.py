"""Figs. 3/4/9/17-19-style bars: region means (ID, OOD, 100+ OOD) per
condition, with per-seed points.

The numbers are `aggregate.region_means` per entry (every cell of a region weighted equally,
docs/official-code.md §7.7) and `aggregate.seed_spread` over the entries of a seed group: the
paper's "mean of three models". The bar is the mean; the points are the individual runs, so the
spread is visible.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from abacus_ray.evaluation.aggregate import region_means, seed_spread

VIEW_LABELS = {
    "id": "ID", "ood": "OOD", "ood100plus": "100+ OOD",
    "ood_digits_30": "OOD (number length - 30)", "ood_array_30": "OOD (array length - 30)",
    "all_ood_30": "All OOD (30x30)", "all_ood_20": "All OOD (20x20)",
}
ARITH_VIEWS = ("id", "ood", "ood100plus")
SORT_VIEWS = ("id", "ood_digits_30", "ood_array_30", "all_ood_30", "all_ood_20")


def entry_means(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per (entry, view): accuracy and first-token accuracy (fractions), cells, problems."""
    return region_means(cells, extra_keys=("entry", "group", "sweep"))


def group_spreads(means: pd.DataFrame, metric: str = "accuracy") -> pd.DataFrame:
    """Mean, std, min, max and number of runs of `metric` over each seed group, per view."""
    if metric not in ("accuracy", "first_accuracy"):
        raise ValueError(f"metric: must be accuracy or first_accuracy, got {metric!r}")
    return seed_spread(means.assign(accuracy=means[metric]), ("group",))


def _r(v: Any) -> float | None:
    return None if v is None or v != v else round(100 * float(v), 2)


def entry_views(means: pd.DataFrame) -> dict[int, dict[str, dict[str, float | None]]]:
    """{entry: {"accuracy": {view: %}, "first": {view: %}}} for the browser."""
    out: dict[int, dict[str, dict[str, float | None]]] = {}
    for r in means.itertuples(index=False):
        e = out.setdefault(int(r.entry), {"accuracy": {}, "first": {}})
        e["accuracy"][r.view] = _r(r.accuracy)
        e["first"][r.view] = _r(r.first_accuracy)
    return out


def group_views(spreads: pd.DataFrame) -> dict[int, dict[str, dict[str, Any]]]:
    """{group: {view: {mean, std, min, max (%), runs}}} for the browser and the tables."""
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for r in spreads.itertuples(index=False):
        out.setdefault(int(r.group), {})[r.view] = {
            "mean": _r(r.mean),
            "std": _r(r.std),
            "min": _r(r.min),
            "max": _r(r.max),
            "runs": int(r.runs),
        }
    return out


def views_of(task: str) -> tuple[str, ...]:
    return SORT_VIEWS if task == "sort" else ARITH_VIEWS
