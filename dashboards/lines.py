"""Fig. 5/10/11-style lines: exact-match accuracy against operand length on the i = j diagonal.

The paper shows only operands of equal length in these plots (docs/official-code.md §8.2): one line
per run (Fig. 10 left) or per k, each line then the mean over that k's runs (Fig. 10 right, Fig.
11), with an "In Distribution" marker at the training length. Here each entry contributes its
diagonal cells; the browser averages entries into one line per chosen dimension.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from abacus_ray.evaluation.aggregate import with_intervals


def diagonals(cells: pd.DataFrame) -> dict[int, dict[str, Any]]:
    """Per entry: lengths x (i = j), accuracy % y, n and the Wilson interval (%), sorted by length.

    Entries with fewer than two diagonal cells draw no line and are left out.
    """
    diag = cells[cells["i"] == cells["j"]]
    if diag.empty:
        return {}
    diag = with_intervals(diag.sort_values(["entry", "i"]))
    out = {}
    for entry, g in diag.groupby("entry", sort=True):
        if len(g) < 2:
            continue
        out[int(entry)] = {
            "x": [int(v) for v in g["i"]],
            "y": [round(100 * float(v), 2) for v in g["accuracy"]],
            "n": [int(v) for v in g["n"]],
            "lo": [round(100 * float(v), 2) for v in g["acc_lo"]],
            "hi": [round(100 * float(v), 2) for v in g["acc_hi"]],
        }
    return out


def diagonal_min(cells: pd.DataFrame, max_length: int) -> float | None:
    """Lowest mean-over-runs accuracy (fraction) on the diagonal up to
    `max_length`: Fig. 10 left's claim."""
    diag = cells[(cells["i"] == cells["j"]) & (cells["i"] <= max_length)]
    if diag.empty:
        return None
    return float(diag.groupby("i")["accuracy"].mean().min())
