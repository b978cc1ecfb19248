"""Fig. 10's view of a results directory: one row per Abacus offset k, and a conclusion drawn only from
intervals that separate.

Fig. 10 trains the same model with several offsets k (`model.max_k`) on size-n data. During training
the Abacus positions of an answer run up to n + 1 + k, so a model has trained embedding rows for the
first n + k + 1 positions only: an i = j problem of that many digits needs a row that training never
reached (its sum has i + 1 digits), and accuracy is expected to be 0 from there on (the collapse in
Fig. 10). Where the smaller offsets are already past their trained rows, a larger k can still
answer: that is the paper's "extrapolation grows with k".

Rates here are pooled over problems (correct / evaluated) with their Wilson 95 % interval; for a
grid with the same number of problems per cell they equal the paper's mean of per-cell accuracies
(`aggregate.region_means`). A comparison is stated only where two intervals do not overlap, because
one training run on another CPU or seed moves the rates by more than the evaluation's sampling error
does (docs/results.md, §2c), and a claim has to hold on any machine.
"""

from __future__ import annotations

import pandas as pd

from abacus_ray.evaluation.aggregate import MODEL_KEYS, diagonal_reach, wilson_interval

K = "model.max_k"
N = "task.train_max_len"


def positions_end(n_train: int, k: int) -> int:
    """The first i = j length whose sum needs an Abacus row that training never reached (n + k + 1)."""
    return int(n_train) + int(k) + 1


def offset_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per model and eval settings, ordered by k: ID and OOD rates with Wilson intervals, the
    diagonal's reach (>= 90 %) and zero-from length, and where the trained positions end.

    Raises naming the column if the rows lack the config columns of an Abacus model.
    """
    for col in (K, N, "model.positions"):
        if col not in cells.columns:
            raise ValueError(f"results: no {col!r} column (Fig. 10's view needs Abacus models' config columns)")
    if set(cells["model.positions"]) != {"abacus"}:
        raise ValueError(f"results: model.positions {sorted(set(cells['model.positions']))}; Fig. 10's view "
                         "compares Abacus offsets only")
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
    body = [[str(r.k), str(r.n), _fmt(r.id), _fmt(r.ood), _int(r.reach), _int(r.zero_from), str(r.end),
             str(r.model_id)[:12]] for r in table.itertuples(index=False)]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(lines)


def conclusion(cells: pd.DataFrame, table: pd.DataFrame) -> str:
    """One line beginning `Conclusion:`, with numbers, stating only what the intervals support."""
    diag = cells[cells["i"] == cells["j"]]
    ids = [r.id[0] for r in table.itertuples(index=False) if r.id is not None]
    parts = []
    if ids:
        parts.append(f"in distribution the {len(table)} models score {_span(ids)} % (ID)")
    parts.append(_collapse(diag, table))
    reach = _past_smallest(diag, table)
    if reach:
        parts.append(reach)
    return "Conclusion: " + "; ".join(parts) + "."


def _collapse(diag: pd.DataFrame, table: pd.DataFrame) -> str:
    """Every model's pooled rate on the diagonal lengths from its trained positions' end on."""
    correct = total = 0
    solved = []
    for r in table.itertuples(index=False):
        past = diag[(diag["model_id"] == r.model_id) & (diag["i"] >= r.end)]
        c, n = int(past["n_correct"].sum()), int(past["n"].sum())
        correct, total = correct + c, total + n
        if c:
            solved.append(f"k = {r.k} {_fmt(_rate(c, n))}")
    ends = ", ".join(str(e) for e in sorted(set(table["end"])))
    if total == 0:
        return f"no diagonal length was evaluated past the trained positions' end ({ends} digits)"
    if not solved:
        hi = wilson_interval(0, total)[1]
        return (f"past where their trained Abacus positions end (n + k + 1 = {ends} digits) they solve "
                f"0 of {total:,} diagonal problems (0 %, 95 % CI up to {100 * hi:.2f} %)")
    return (f"past where their trained Abacus positions end (n + k + 1 = {ends} digits) they solve "
            f"{correct} of {total:,} diagonal problems ({'; '.join(solved)})")


def _past_smallest(diag: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """Compare every larger k with the smallest on the lengths the smallest has no trained rows for and
    the next k still has: a difference is claimed only where the intervals separate."""
    ks = sorted(set(table["k"]))
    if len(ks) < 2 or table["n"].nunique() != 1:
        return None
    n = int(table["n"].iloc[0])
    lo_len, hi_len = positions_end(n, ks[0]), positions_end(n, ks[1])
    lengths = sorted(int(i) for i in set(diag["i"]) if lo_len <= i < hi_len)
    if not lengths:
        return None
    rates = {}
    for r in table.itertuples(index=False):
        sel = diag[(diag["model_id"] == r.model_id) & diag["i"].isin(lengths)]
        rates.setdefault(r.k, []).append(_rate(sel["n_correct"].sum(), sel["n"].sum()))
    base = rates[ks[0]]
    base_hi = max(x[2] for x in base)
    above: list[tuple[int, tuple]] = []
    unclear: list[tuple[int, tuple]] = []
    for k in ks[1:]:
        for rate in rates[k]:
            (above if rate[1] > base_hi else unclear).append((k, rate))
    span = f"{lengths[0]}-{lengths[-1]}" if len(lengths) > 1 else str(lengths[0])
    text = (f"at {span} digits, past k = {ks[0]}'s trained positions, k = {ks[0]} solves "
            f"{' / '.join(_fmt(x) for x in base)}")
    if above:
        text += (f" while k = {', '.join(str(k) for k, _ in above)} solve{'s' if len(above) == 1 else ''} "
                 f"{', '.join(_fmt(r) for _, r in above)} (intervals above k = {ks[0]}'s: a larger k solves "
                 f"lengths k = {ks[0]} cannot)")
    if unclear:
        text += (f"; k = {', '.join(str(k) for k, _ in unclear)} at {', '.join(_fmt(r) for _, r in unclear)} "
                 f"overlap{'s' if len(unclear) == 1 else ''} k = {ks[0]}'s interval (no difference shown)")
    return text


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


def _span(values) -> str:
    lo, hi = 100 * min(values), 100 * max(values)
    return f"{lo:.1f}" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}-{hi:.1f}"


def _int(v) -> str:
    return "-" if v is None or pd.isna(v) else str(int(v))
