"""Fig. 15-style view: accuracy against the number of test-time recurrences of one looped model.

The paper decodes a 1x16 model's output after every recurrence (docs/official-code.md §7.8). A
results directory holds that data when one model was scored at several `recurrences` (the sweep's
eval_recurrences axis); each (model, region view) becomes one line over the recurrence counts.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

SERIES_KEYS = ("model_id", "task", "per_cell", "eval_seed", "require_eos")


def recurrence_series(cells: pd.DataFrame, means: pd.DataFrame) -> list[dict[str, Any]]:
    """Lines of region-mean accuracy (%) vs recurrences, for models scored at two or more depths."""
    keys = [k for k in SERIES_KEYS if k in means.columns]
    if "recurrences" not in means.columns or means.empty:
        return []
    runs = cells.drop_duplicates("model_id").set_index("model_id")["run"].to_dict()
    out = []
    for key, g in means.groupby(keys + ["view"], sort=True, dropna=False):
        depths = g.dropna(subset=["recurrences"]).sort_values("recurrences")
        if depths["recurrences"].nunique() < 2:
            continue
        row = dict(zip(keys + ["view"], key, strict=True))
        out.append(
            {
                "model_id": str(row["model_id"]),
                "run": runs.get(row["model_id"], str(row["model_id"])[:12]),
                "task": row["task"],
                "view": row["view"],
                "entries": [int(e) for e in depths["entry"]],
                "x": [int(v) for v in depths["recurrences"]],
                "y": [round(100 * float(v), 2) for v in depths["accuracy"]],
            }
        )
    return out
