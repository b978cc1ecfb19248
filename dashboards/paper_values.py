"""The paper's reported numbers (`paper_values.json`) beside ours, figure by figure.

The data file holds only numbers printed in the paper (bar labels, table entries, one claim in the
text), each with its page and the place it was read from; values only readable from a plot's shape
are left out and the file says so. A value names the condition it belongs to: `match` (what makes
it that bar: embedding, architecture, block, ...) and `setting` (the paper's scale: training length,
depth). Our seed groups are compared at the same setting when we ran it, else at any setting that
has the same `match` (a tiny-preset sweep), and the table says which.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from abacus_ray.evaluation.aggregate import view_mask, wilson_interval
from dashboards.bars import VIEW_LABELS
from dashboards.data import clean
from dashboards.lines import diagonal_min

DATA_FILE = Path(__file__).with_name("paper_values.json")
METRICS = ("accuracy", "first_accuracy", "diag_min")
DIAGONAL_MAX = 120  # Fig. 10's claim covers operands up to 120 digits


@lru_cache(maxsize=4)
def load(path: str | Path = DATA_FILE) -> dict[str, Any]:
    """The data file, checked for the fields the comparison needs."""
    doc = json.loads(Path(path).read_text())
    for fig in doc.get("figures", []):
        for v in fig.get("values", []):
            for key in ("match", "setting", "view", "metric", "value", "source"):
                if key not in v:
                    raise ValueError(f"{path}: a value of {fig.get('figure')} lacks {key!r}")
            if v["metric"] not in METRICS:
                raise ValueError(f"{path}: metric {v['metric']!r} of {fig.get('figure')} is "
                                 f"not one of {METRICS}")
    return doc


def same(ours: Any, theirs: Any) -> bool:
    """Config equality across Parquet types: bools as bools, numbers as
    numbers, the rest as text."""
    ours = clean(ours)
    if ours is None:
        return theirs is None
    if isinstance(theirs, bool):
        return isinstance(ours, (bool, int)) and bool(ours) == theirs
    if isinstance(theirs, (int, float)):
        try:
            return float(ours) == float(theirs)
        except (TypeError, ValueError):
            return False
    return str(ours) == str(theirs)


def matches(group: dict[str, Any], cond: dict[str, Any]) -> bool:
    return all(k in group and same(group[k], v) for k, v in cond.items())


def condition_label(value: dict[str, Any]) -> str:
    parts = [str(v) for v in {**value["match"], **value["setting"]}.values()]
    return " · ".join(parts)


def quantity_label(value: dict[str, Any]) -> str:
    if value["metric"] == "diag_min":
        return f"lowest accuracy, {value['view']}"
    label = VIEW_LABELS.get(value["view"], value["view"])
    return f"{label}, min. elem. only" if value["metric"] == "first_accuracy" else label


def _setting_text(group: dict[str, Any], value: dict[str, Any]) -> str:
    """Where our run differs from the paper's setting, e.g. 'task.train_max_len=5, block=2x1'."""
    diff = [
        f"{k}={clean(group.get(k))}"
        for k, v in value["setting"].items()
        if not same(group.get(k), v)
    ]
    return ", ".join(diff)


def compare(
    cells: pd.DataFrame,
    groups: pd.DataFrame,
    spreads: dict[str, dict[int, dict[str, dict[str, Any]]]],
    doc: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One row per (paper value, matching seed group of ours), or one row with no
    ours when nothing matches.

    groups: one row per seed group (config columns plus `sweep`, `arch`, `block`, `group`).
    spreads: {"accuracy": bars.group_views(...), "first_accuracy": ...}.
    """
    doc = doc or load()
    present = set(groups["sweep"]) if not groups.empty else set()
    figure_sweeps = {s for fig in doc["figures"] for s in fig.get("sweeps", [])}
    records = groups.to_dict("records")
    rows = []
    for fig in doc["figures"]:
        wanted = [s for s in fig.get("sweeps", []) if s in present]
        task = {"task.name": fig.get("task", "add")}
        # A figure's own sweeps; else plain results of no figure, which must
        # match the paper's setting too.
        pool = [g for g in records if matches(g, task)
                and (g["sweep"] in wanted if wanted else g["sweep"] not in figure_sweeps)]
        for value in fig["values"]:
            found = [g for g in pool if matches(g, {**value["match"], **value["setting"]})]
            scaled = not found and bool(wanted)
            if scaled:
                found = [g for g in pool if matches(g, value["match"])]
            base = {
                "figure_id": fig["id"],
                "figure": fig["figure"],
                "condition": condition_label(value),
                "quantity": quantity_label(value),
                "paper": value["value"],
                "relation": value.get("relation", "="),
                "source": value["source"],
                "figure_sweeps": list(fig.get("sweeps", [])),
                "ours": None,
                "std": None,
                "lo": None,
                "hi": None,
                "runs": 0,
                "group": None,
                "sweep": None,
                "our_setting": "",
                "scaled": False,
            }
            if not found:
                rows.append(base | {"note": "no matching run"})
                continue
            for g in found:
                row = base | {"group": int(g["group"]), "sweep": g["sweep"], "scaled": scaled,
                              "our_setting": _setting_text(g, value) if scaled else ""}
                if value["metric"] == "diag_min":
                    low = diagonal_min(cells[cells["group"] == g["group"]], DIAGONAL_MAX)
                    row |= {"ours": None if low is None else round(100 * low, 2),
                            "runs": int(cells.loc[cells["group"] == g["group"], "entry"].nunique()),
                            "note": "" if low is not None else "no diagonal cells"}
                else:
                    stats = spreads[value["metric"]].get(int(g["group"]), {}).get(value["view"])
                    row |= (
                        {
                            "ours": stats["mean"],
                            "std": stats["std"],
                            "runs": stats["runs"],
                            "note": "",
                        }
                        if stats
                        else {"note": "region not evaluated"}
                    )
                if row["ours"] is not None:
                    row["lo"], row["hi"] = interval(cells, int(g["group"]), value)
                rows.append(row)
    return rows


def interval(
    cells: pd.DataFrame, group: int, value: dict[str, Any]
) -> tuple[float | None, float | None]:
    """A 95 % interval (%) for our number from the evaluation's sample of
    problems (not the seeds' spread).

    A region mean averages C cell accuracies p_i over n_i problems each; with Var = p(1 - p) /
    N_eff, N_eff = C^2 / sum(1 / n_i), the Wilson interval of p-bar at N_eff is the pooled Wilson
    interval when every cell holds the same number of problems, and stays inside 0-100 % at p-bar =
    0 or 1. For `diag_min` it is the lowest cell's own Wilson interval.
    """
    if cells.empty or "group" not in cells.columns:
        return None, None
    mine = cells[cells["group"] == group]
    if value["metric"] == "diag_min":
        diag = mine[(mine["i"] == mine["j"]) & (mine["i"] <= DIAGONAL_MAX)]
        if diag.empty:
            return None, None
        low = diag.loc[diag["accuracy"].idxmin()]
        lo, hi = wilson_interval(int(low["n_correct"]), int(low["n"]))
        return round(100 * lo, 2), round(100 * hi, 2)
    if mine.empty:
        return None, None
    sel = mine[view_mask(mine, str(mine["task"].iloc[0]), value["view"])]
    if sel.empty:
        return None, None
    correct = sel["n_first_correct"] if value["metric"] == "first_accuracy" else sel["n_correct"]
    p = float((correct / sel["n"]).mean())
    n_eff = len(sel) ** 2 / float((1.0 / sel["n"]).sum())
    lo, hi = wilson_interval(p * n_eff, n_eff)
    return round(100 * lo, 2), round(100 * hi, 2)


def run_command(fig: dict[str, Any]) -> str:
    """The command that runs a figure at CPU scale (its first sweep; `--preset
    paper` for the paper's)."""
    return f"abacus-ray sweep {fig['sweeps'][0]} --preset tiny" if fig.get("sweeps") else ""


def omitted(doc: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(figure, what was left out and why) for figures whose values are only readable from plots."""
    doc = doc or load()
    return [(f["figure"], f["omitted"]) for f in doc["figures"] if f.get("omitted")]
