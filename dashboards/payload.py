"""The JSON a sweep page's script draws from: entries with their selector values, seed groups,
heatmap grids, diagonals, region means and per-recurrence series.

Selector values are strings (what a `<select>` holds); `dims` lists the selectors in display order
with their sorted values. The run, seed, embedding, architecture and k selectors are always there;
training length, task, test-time recurrences, eval set and "variant" (any other swept config field)
appear when they vary.
"""

from __future__ import annotations

from typing import Any

from dashboards.bars import VIEW_LABELS, entry_views, views_of
from dashboards.data import clean
from dashboards.heatmaps import entry_grids, group_grids
from dashboards.lines import diagonals
from dashboards.recurrence import recurrence_series
from dashboards.sitedata import EVAL_COLUMNS, SiteData

ALWAYS = ("run", "seed", "positions", "arch", "k")
DIM_LABELS = {
    "run": "Run",
    "seed": "Seed",
    "positions": "Embedding",
    "arch": "Architecture",
    "k": "k (Abacus offset)",
    "train_len": "Training length",
    "task": "Task",
    "recurrences": "Test recurrences",
    "evalset": "Eval set",
    "variant": "Variant",
}
CONDITION_DIMS = ("positions", "arch", "k", "train_len", "variant")


def _text(v: Any) -> str:
    v = clean(v)
    return "—" if v is None else str(v)


def _sort_key(v: str):
    try:
        return (0, float(v), v)
    except ValueError:
        return (1, 0.0, v)


def entry_dims(row: dict[str, Any], variant_cols: list[str]) -> dict[str, str]:
    """The selector values of one entry."""
    return {
        "run": _text(row.get("run")),
        "seed": _text(row.get("seed")),
        "positions": _text(row.get("model.positions")),
        "arch": f"{row.get('arch')} {row.get('block')}",
        "k": _text(row.get("model.max_k")),
        "train_len": _text(row.get("task.train_max_len")),
        "task": _text(row.get("task")),
        "recurrences": _text(row.get("recurrences")),
        "evalset": ", ".join(f"{c}={_text(row.get(c))}" for c in EVAL_COLUMNS),
        "variant": ", ".join(f"{c}={_text(row.get(c))}" for c in variant_cols) or "—",
    }


def group_label(dims: dict[str, str], shown: list[str]) -> str:
    """A seed group's name from the condition selectors that vary on the page."""
    parts = []
    for d in shown:
        if d in CONDITION_DIMS or d in ("task", "recurrences", "evalset"):
            prefix = {"k": "k=", "train_len": "n=", "recurrences": "rec="}.get(d, "")
            parts.append(prefix + dims[d])
    return " · ".join(parts) or "all runs"


def selector_values(
    data: SiteData,
) -> tuple[dict[int, dict[str, str]], dict[str, list[str]], list[str], list[str]]:
    """(dims per entry, sorted values per dim, dims shown, condition dims
    that vary) for one sweep."""
    variant_cols = data.variant_columns()
    dims_of = {
        int(r["entry"]): entry_dims(r, variant_cols) for r in data.entries.to_dict("records")
    }
    values = {d: sorted({dims[d] for dims in dims_of.values()}, key=_sort_key) for d in DIM_LABELS}
    shown = [d for d in DIM_LABELS if d in ALWAYS or len(values[d]) > 1]
    varying = [d for d in shown if len(values[d]) > 1 and d not in ("run", "seed")]
    return dims_of, values, shown, varying


def group_labels(data: SiteData) -> dict[int, str]:
    """A name per seed group of one sweep, from the selectors that vary in it."""
    dims_of, _, _, varying = selector_values(data)
    out: dict[int, str] = {}
    for r in data.entries.to_dict("records"):
        out.setdefault(int(r["group"]), group_label(dims_of[int(r["entry"])], varying))
    return out


def sweep_payload(data: SiteData, sweep: str, stamp: str) -> dict[str, Any]:
    """Everything `static/dashboard.js` needs for one sweep page."""
    dims_of, values, shown, varying = selector_values(data)
    labels = group_labels(data)
    rows = data.entries.to_dict("records")
    has_sort = bool((data.entries["task"] == "sort").any())
    views = entry_views(data.means)
    entries = []
    for r in rows:
        e = int(r["entry"])
        entries.append(
            {
                "id": e,
                "group": int(r["group"]),
                "run": dims_of[e]["run"],
                "model": str(r["model_id"])[:12],
                "task": r["task"],
                "n_train": clean(r.get("task.train_max_len")),
                "n_train_array": clean(r.get("task.train_max_array")),
                "dims": dims_of[e],
                "views": views.get(e, {"accuracy": {}, "first": {}}),
            }
        )
    groups = {}
    for g in data.groups.to_dict("records"):
        gid = int(g["group"])
        members = [int(r["entry"]) for r in rows if int(r["group"]) == gid]
        groups[str(gid)] = {"label": labels[gid], "entries": members,
                            "accuracy": data.spreads["accuracy"].get(gid, {}),
                            "first": data.spreads["first_accuracy"].get(gid, {})}
    grids = {f"e{k}": v for k, v in entry_grids(data.cells, with_first=has_sort).items()}
    grids |= {f"g{k}": v for k, v in group_grids(data.cells, with_first=has_sort).items()}
    tasks = sorted(set(data.entries["task"]))
    return {
        "sweep": sweep, "stamp": stamp, "has_sort": has_sort,
        "dims": [{"key": d, "label": DIM_LABELS[d], "values": values[d]} for d in shown],
        "varying": varying, "entries": entries, "groups": groups, "grids": grids,
        "diagonals": {str(k): v for k, v in diagonals(data.cells).items()},
        "recurrence": recurrence_series(data.cells, data.means),
        "views": {t: [[v, VIEW_LABELS[v]] for v in views_of(t)] for t in tasks},
    }
