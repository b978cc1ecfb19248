"""A figure's claim and its verdict on a sweep's results: one mechanism for every figure and table.

A `Claim` names the arms (rows selected by config or result columns, e.g.
`model.positions = abacus`, or the lowest / highest value of a column present), the cells (a summary
view, the i = j diagonal, lengths relative to each model's training length, or the lengths past one
Abacus offset's trained positions), and what counts as shown:

* a comparison (`pairs`): in every pair the first arm's rate lies above the second's;
* a threshold (`arms` + `threshold`): every arm's rate lies at or above it (or, `below`, under it).

A rate is pooled over the arm's cells (correct / problems) with its Wilson 95 % interval. A claim is
**shown** where the intervals separate in its direction, **contradicted** where they separate the
other way, and **not shown at this scale** where they overlap or an arm or cell is missing. Where
every arm holds two or more training seeds, the seed spread must separate too (each seed's pooled
rate: the lowest of one arm above the highest of the other), because a training seed moves a rate by
more than the evaluation's sampling error does. The verdict and the numbers that decide it form the
sweep's `Conclusion:` line, with what the paper reports for the same arms and cells (`paper`) beside
them. Pandas is imported only where a verdict is computed, so that a figure module declaring its
claim stays cheap to import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

SHOWN = "shown"
CONTRADICTED = "contradicted"
NOT_SHOWN = "not shown at this scale"
# What a rate counts: exact match, or the first answer token alone (Table 2's "min. elem. only")
SCORES = {"exact": "n_correct", "first": "n_first_correct"}
K = "model.max_k"


@dataclass(frozen=True)
class Pick:
    """The lowest (`min`) or highest (`max`) value of a column among the rows an arm selects."""

    which: str

    def __post_init__(self) -> None:
        if self.which not in ("min", "max"):
            raise ValueError(f"Pick: which must be 'min' or 'max', got {self.which!r}")


MIN, MAX = Pick("min"), Pick("max")
EMBEDDING_NAMES = {
    "abacus": "Abacus",
    "fire": "FIRE",
    "nope": "NoPE",
    "rope": "RoPE",
    "abacus+fire": "Abacus+FIRE",
    "abacus+rope": "Abacus+RoPE",
}


@dataclass(frozen=True)
class Arm:
    """Rows whose columns hold `where`'s values: a value, a tuple of values (any of them), or a Pick
    (resolved after the plain values, among the rows they leave)."""

    label: str
    where: dict[str, Any] = field(default_factory=dict)


def embedding(positions: str) -> Arm:
    """The arm of one position embedding (`model.positions`), named as the paper does."""
    return Arm(EMBEDDING_NAMES.get(positions, positions), {"model.positions": positions})


@dataclass(frozen=True)
class Cells:
    """Which cells a rate pools. `lengths` (lo, hi): lo < max(i, j) / n <= hi, n the model's
    training length. `past_positions`: for a pair of Abacus arms, the diagonal lengths from where
    the second arm's trained positions end (n + k + 1) up to where the first arm's end."""

    label: str
    view: str | None = None  # a summary view of `regions.views_for` (id, ood, all_ood_30, ...)
    diagonal: bool = False
    lengths: tuple[float | None, float | None] = (None, None)
    past_positions: bool = False


@dataclass(frozen=True)
class Claim:
    """What a figure claims, checkable on its sweep's results (see the module's docstring)."""

    figure: str  # e.g. "Fig. 10", "Table 1"
    text: str  # the claim, in words
    cells: Cells
    # what the paper reports for the same arms and cells (its numbers, or what its plot shows)
    paper: str = ""
    pairs: tuple[tuple[Arm, Arm], ...] = ()
    arms: tuple[Arm, ...] = ()
    threshold: float | None = None
    below: bool = False
    best: bool = False  # threshold: each arm's best model decides (a search's claim)
    within: tuple[str, ...] = ()  # columns held equal: the claim must hold in every group
    score: str = "exact"
    # below a threshold: the paper's contrast in the same sweep, which must lie above it
    control: Arm | None = None

    def __post_init__(self) -> None:
        if bool(self.pairs) == (self.threshold is not None) or bool(self.arms) != (
            self.threshold is not None
        ):
            raise ValueError(
                f"{self.figure}: a claim has pairs (a comparison) or arms and a threshold"
            )
        if self.threshold is not None and not 0 < self.threshold < 1:
            raise ValueError(f"{self.figure}: threshold must lie in (0, 1), got {self.threshold}")
        if self.score not in SCORES:
            raise ValueError(
                f"{self.figure}: score must be one of {', '.join(SCORES)}, got {self.score!r}"
            )
        if self.cells.past_positions and not self.pairs:
            raise ValueError(f"{self.figure}: past_positions compares two Abacus arms (pairs)")

    def all_arms(self) -> tuple[Arm, ...]:
        return tuple(a for pair in self.pairs for a in pair) + self.arms


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    verdict: str  # SHOWN, CONTRADICTED or NOT_SHOWN
    evidence: str

    def line(self) -> str:
        """`Conclusion (Fig. N): CLAIM: VERDICT — EVIDENCE`, then the paper's value beside ours."""
        paper = f" (paper: {self.claim.paper})" if self.claim.paper else ""
        return (
            f"Conclusion ({self.claim.figure}): {self.claim.text}: {self.verdict} — "
            f"{self.evidence}{paper}"
        )


@dataclass(frozen=True)
class Rate:
    """An arm's pooled rate and interval, and its per-seed rates."""

    label: str
    hit: int
    n: int
    lo: float
    hi: float
    seeds: tuple[float, ...]

    @property
    def p(self) -> float:
        return self.hit / self.n

    def text(self) -> str:
        return (
            f"{self.label} {pct(self.p)} [{100 * self.lo:.1f}, {100 * self.hi:.1f}] "
            f"({self.hit:,}/{self.n:,})"
        )


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def judge(claim: Claim, cells: pd.DataFrame) -> Verdict:
    """The claim's verdict on `cells` (result rows of one sweep) with the numbers that decide it."""
    if cells.empty:
        return Verdict(claim, NOT_SHOWN, "no result rows")
    missing = sorted(
        {c for a in claim.all_arms() for c in a.where if c not in cells.columns}
        | {c for c in claim.within if c not in cells.columns}
    )
    if missing:
        return Verdict(claim, NOT_SHOWN, f"the results have no {missing[0]!r} column")
    groups = (
        [((), cells)]
        if not claim.within
        else [
            (k if isinstance(k, tuple) else (k,), g)
            for k, g in cells.groupby(list(claim.within), sort=True)
        ]
    )
    outcomes: list[tuple[str, str]] = []
    for key, group in groups:
        prefix = ", ".join(f"{_short(c)} = {v}" for c, v in zip(claim.within, key, strict=True))
        for verdict, text in _group_outcomes(claim, group):
            outcomes.append((verdict, f"{prefix}: {text}" if prefix else text))
    verdicts = {v for v, _ in outcomes}
    verdict = (
        CONTRADICTED if CONTRADICTED in verdicts else SHOWN if verdicts == {SHOWN} else NOT_SHOWN
    )
    return Verdict(claim, verdict, f"{claim.cells.label}: " + "; ".join(t for _, t in outcomes))


def _group_outcomes(claim: Claim, group: pd.DataFrame) -> list[tuple[str, str]]:
    if claim.pairs:
        return [_compare(claim, group, a, b) for a, b in claim.pairs]
    return [_against_threshold(claim, group, arm) for arm in claim.arms]


def select(rows: pd.DataFrame, arm: Arm) -> tuple[pd.DataFrame, str]:
    """The arm's rows, and its label with any picked value named (e.g. `largest k (max_k = 12)`)."""
    picks = {c: v for c, v in arm.where.items() if isinstance(v, Pick)}
    for col, value in arm.where.items():
        if isinstance(value, Pick):
            continue
        values = value if isinstance(value, tuple) else (value,)
        rows = rows[rows[col].isin(values)]
    named = []
    for col, pick in picks.items():
        if rows.empty:
            break
        chosen = rows[col].min() if pick.which == "min" else rows[col].max()
        rows = rows[rows[col] == chosen]
        named.append(f"{_short(col)} = {_value(chosen)}")
    return rows, arm.label + (f" ({', '.join(named)})" if named else "")


def in_cells(rows: pd.DataFrame, cells: Cells) -> pd.DataFrame:
    """The rows of `cells`' view, diagonal and lengths (not `past_positions`: see `_window`)."""
    from abacus_ray.evaluation.regions import views_for

    keep = rows
    if cells.view is not None:
        mask = [
            cells.view in views_for(t) and views_for(t)[cells.view](r, i, j)
            for t, r, i, j in zip(keep["task"], keep["region"], keep["i"], keep["j"], strict=True)
        ]
        keep = keep[mask]
    if cells.diagonal:
        keep = keep[keep["i"] == keep["j"]]
    lo, hi = cells.lengths
    if lo is not None or hi is not None:
        ratio = keep[["i", "j"]].max(axis=1) / keep["n_train"]
        keep = keep[
            (ratio > lo if lo is not None else True) & (ratio <= hi if hi is not None else True)
        ]
    return keep


def _window(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Diagonal rows from where arm b's trained Abacus positions end to where arm a's do, and the
    window's name (empty rows and the reason where there is no window)."""
    from abacus_ray.evaluation.offset_reach import positions_end

    if K not in a.columns:
        return a.iloc[:0], b.iloc[:0], f"the results have no {K!r} column"
    ka, kb = int(a[K].min()), int(b[K].max())
    if ka <= kb:
        return (
            a.iloc[:0],
            b.iloc[:0],
            f"k = {ka} is not above k = {kb}, so no length lies between them",
        )

    def inside(rows: pd.DataFrame) -> pd.DataFrame:
        diag = rows[rows["i"] == rows["j"]]
        start = diag["n_train"].map(lambda n: positions_end(n, kb))
        stop = diag["n_train"].map(lambda n: positions_end(n, ka))
        return diag[(diag["i"] >= start) & (diag["i"] < stop)]

    a, b = inside(a), inside(b)
    lengths = sorted(int(i) for i in set(a["i"]) | set(b["i"]))
    if not lengths:
        return (
            a,
            b,
            f"no diagonal length past k = {kb}'s trained positions and before k = {ka}'s "
            "was evaluated",
        )
    span = f"{lengths[0]}-{lengths[-1]}" if len(lengths) > 1 else str(lengths[0])
    return a, b, f"at {span} digits, past k = {kb}'s trained positions, before k = {ka}'s"


def rate(rows: pd.DataFrame, label: str, score: str) -> Rate:
    """The pooled rate of `rows` with its Wilson interval, and each training seed's pooled rate."""
    from abacus_ray.evaluation.aggregate import wilson_interval

    hits = rows[SCORES[score]]
    hit, n = int(hits.sum()), int(rows["n"].sum())
    lo, hi = wilson_interval(hit, n)
    seeds: tuple[float, ...] = ()
    if "seed" in rows.columns and rows["seed"].nunique() > 1:
        by = rows.assign(_hit=hits).groupby("seed")[["_hit", "n"]].sum()
        seeds = tuple(float(h / m) for h, m in zip(by["_hit"], by["n"], strict=True))
    return Rate(label, hit, n, lo, hi, seeds)


def _arm_rows(group: pd.DataFrame, arm: Arm) -> tuple[pd.DataFrame, str, str | None]:
    rows, label = select(group, arm)
    if rows.empty:
        return rows, label, f"no results of {label} ({_where(arm)})"
    return rows, label, None


def _compare(claim: Claim, group: pd.DataFrame, arm_a: Arm, arm_b: Arm) -> tuple[str, str]:
    a, label_a, why = _arm_rows(group, arm_a)
    if why:
        return NOT_SHOWN, why
    b, label_b, why = _arm_rows(group, arm_b)
    if why:
        return NOT_SHOWN, why
    if a.index.equals(b.index):
        return NOT_SHOWN, f"{label_a} and {label_b} are the same results: nothing to compare"
    where = ""
    if claim.cells.past_positions:
        a, b, where = _window(a, b)
        if a.empty or b.empty:
            return NOT_SHOWN, f"{label_a} vs {label_b}: {where}"
        where += ": "
    else:
        a, b = in_cells(a, claim.cells), in_cells(b, claim.cells)
        for rows, label in ((a, label_a), (b, label_b)):
            if rows.empty:
                return NOT_SHOWN, f"no cell of {label} was evaluated"
    ra, rb = rate(a, label_a, claim.score), rate(b, label_b, claim.score)
    up, down = ra.lo > rb.hi, rb.lo > ra.hi
    apart = "separate" if up or down else "overlap"
    text = f"{where}{ra.text()} vs {rb.text()} (intervals {apart})"
    if ra.seeds and rb.seeds:
        up, down = up and min(ra.seeds) > max(rb.seeds), down and min(rb.seeds) > max(ra.seeds)
        text += f"; over seeds {_spread(ra)} vs {_spread(rb)}"
    return (SHOWN if up else CONTRADICTED if down else NOT_SHOWN), text


def _against_threshold(claim: Claim, group: pd.DataFrame, arm: Arm) -> tuple[str, str]:
    rows, label, why = _arm_rows(group, arm)
    if why:
        return NOT_SHOWN, why
    rows = in_cells(rows, claim.cells)
    if rows.empty:
        return NOT_SHOWN, f"no cell of {label} was evaluated"
    if claim.best:
        key = "name" if "name" in rows.columns else "model_id"
        rates = [
            rate(g, f"{label} ({k})", claim.score) for k, g in rows.groupby(key, sort=True)
        ]
        r = max(rates, key=lambda x: (x.p, x.n))
    else:
        r = rate(rows, label, claim.score)
    t = claim.threshold
    above, under = r.lo >= t, r.hi < t
    if r.seeds:
        above, under = above and min(r.seeds) >= t, under and max(r.seeds) < t
    shown, against = (under, above) if claim.below else (above, under)
    text = r.text() + (f"; over seeds {_spread(r)}" if r.seeds else "")
    text += f" against {'<' if claim.below else '>='} {100 * t:g} %"
    return (SHOWN if shown else CONTRADICTED if against else NOT_SHOWN), text


def _spread(r: Rate) -> str:
    return f"{pct(min(r.seeds))}-{pct(max(r.seeds))} ({len(r.seeds)} seeds)"


def _where(arm: Arm) -> str:
    return (
        ", ".join(
            f"{c} = {v.which if isinstance(v, Pick) else _value(v)}" for c, v in arm.where.items()
        )
        or "every row"
    )


def _short(col: str) -> str:
    return col.rsplit(".", 1)[-1]


def _value(v: Any) -> str:
    if isinstance(v, tuple):
        return " or ".join(_value(x) for x in v)
    if hasattr(v, "item"):
        v = v.item()
    return str(v)
