"""Fig. 10's view of a results directory: one row per Abacus offset k, with where its trained
positions end.

Fig. 10 trains the same model with several offsets k (`model.max_k`) on size-n data. During training
the Abacus positions of an answer run up to n + 1 + k, so a model has trained embedding rows for the
first n + k + 1 positions only: an i = j problem of that many digits needs a row that training never
reached (its sum has i + 1 digits), and accuracy is expected to be 0 from there on (the collapse in
Fig. 10). Where the smaller offsets are already past their trained rows, a larger k can still
answer: that is the paper's "extrapolation grows with k".

Rates here are pooled over problems (correct / evaluated) with their Wilson 95 % interval; for a
grid with the same number of problems per cell they equal the paper's mean of per-cell accuracies
(`aggregate.region_means`). What the table shows of Fig. 10's claim is decided by the figure's
`CLAIM` (`figures/fig10_k.py`, `evaluation/claims.py`), which compares the offsets on the lengths
between their trained positions' ends.
"""

from __future__ import annotations

import pandas as pd

from abacus_ray.evaluation.aggregate import MODEL_KEYS, diagonal_reach, wilson_interval

K = "model.max_k"
N = "task.train_max_len"


def positions_end(n_train: int, k: int) -> int:
    """The first i = j length whose sum needs an Abacus row training never reached (n + k + 1)."""
    return int(n_train) + int(k) + 1


def offset_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per model and eval settings, ordered by k: ID and OOD rates with Wilson intervals,
    the diagonal's reach (>= 90 %) and zero-from length, and where the trained positions end.

    Raises naming the column if the rows lack the config columns of an Abacus model.
    """
    for col in (K, N, "model.positions"):
        if col not in cells.columns:
            raise ValueError(f"results: no {col!r} column (Fig. 10's view needs Abacus models' "
                             "config columns)")
    if set(cells["model.positions"]) != {"abacus"}:
        raise ValueError(f"results: model.positions {sorted(set(cells['model.positions']))}; "
                         "Fig. 10's view compares Abacus offsets only")
    keys = [k for k in MODEL_KEYS if k in cells.columns]
    rows = []
    for key, g in cells.groupby(keys, dropna=False, sort=False):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        row |= {"k": int(g[K].iloc[0]), "n": int(g[N].iloc[0])}
        for region in ("id", "ood"):
            sel = g[g["region"] == region]
            row[region] = _rate(sel["n_correct"].sum(), sel["n"].sum())
        row["end"] = positions_end(row["n"], row["k"])
        rows.append(row)
    table = pd.DataFrame(rows)
    reach = diagonal_reach(cells)
    table = table.merge(reach, on=keys, how="left")
    return table.sort_values(["k", "n", "model_id"], kind="stable").reset_index(drop=True)


def format_offset_table(table: pd.DataFrame) -> str:
    """Plain text, one row per model in k order; rates as `% [95 % interval]`."""
    head = ["k", "n", "ID % [95 % CI]", "OOD % [95 % CI]", "reach >= 90 %", "0 % from",
            "trained positions end", "model_id"]
    body = [[str(r.k), str(r.n), _fmt(r.id), _fmt(r.ood), _int(r.reach), _int(r.zero_from),
             str(r.end), str(r.model_id)[:12]] for r in table.itertuples(index=False)]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(lines)


def _rate(correct, total) -> tuple[float, float, float] | None:
    correct, total = int(correct), int(total)
    if total == 0:
        return None
    lo, hi = wilson_interval(correct, total)
    return correct / total, lo, hi


def _fmt(rate) -> str:
    if rate is None:
        return "-"
    p, lo, hi = rate
    return f"{100 * p:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]"


def _int(v) -> str:
    return "-" if v is None or pd.isna(v) else str(int(v))
