"""Tables 1-2-style sorting tables: exact match per region view, and the minimum element alone.

Rows are the sweep's seed groups of sorting models; columns are the views of `regions.SORT_VIEWS`
(ID, OOD number length - 30, OOD array length - 30, All OOD 30x30 and 20x20) as mean ± std over
runs (%), then "All OOD (30x30), min. elem. only": the first answer token right, Table 2's second
row.
"""

from __future__ import annotations

from typing import Any

from dashboards.bars import SORT_VIEWS, VIEW_LABELS
from dashboards.html import Raw, fmt_pct, table
from dashboards.sitedata import SiteData

FIRST_VIEW = "all_ood_30"


def sorting_rows(data: SiteData, labels: dict[int, str]) -> list[list[Any]]:
    """One row per seed group of sorting models: condition, runs, then mean ± std per view."""
    rows = []
    for g in data.groups[data.groups["task"] == "sort"].to_dict("records"):
        gid = int(g["group"])
        acc = data.spreads["accuracy"].get(gid, {})
        first = data.spreads["first_accuracy"].get(gid, {}).get(FIRST_VIEW, {})
        runs = max([v.get("runs", 0) for v in acc.values()], default=0)
        rows.append(
            [labels.get(gid, str(gid)), runs]
            + [fmt_pct(acc.get(v, {}).get("mean"), acc.get(v, {}).get("std")) for v in SORT_VIEWS]
            + [fmt_pct(first.get("mean"), first.get("std"))]
        )
    return rows


def sorting_table(data: SiteData, labels: dict[int, str]) -> Raw | None:
    """The HTML table, or None when the sweep has no sorting models."""
    rows = sorting_rows(data, labels)
    if not rows:
        return None
    cols = [
        "Condition",
        "Runs",
        *[VIEW_LABELS[v] for v in SORT_VIEWS],
        f"{VIEW_LABELS[FIRST_VIEW]}, min. elem. only",
    ]
    return table(cols, rows, numeric=[False] + [True] * (len(cols) - 1))
