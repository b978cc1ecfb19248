"""A figure's claim and its verdict on a sweep's results: one mechanism for every figure and table.

A `Claim` names the arms (rows selected by config or result columns, e.g.
`model.positions = abacus`, or the lowest / highest value of a column present), the cells (a summary
view, the i = j diagonal, lengths relative to each model's training length, or the lengths past one
Abacus offset's trained positions), and what counts as shown:

* a comparison (`pairs`): in every pair the first arm's rate lies above the second's;
* a threshold (`arms` + `threshold`): every arm's rate lies at or above it (or, `below`, under it).

A rate is pooled over the arm's cells (correct / problems) with its Wilson 95 % interval. Four
verdicts, each never stronger than its evidence:

* **not learned at this scale**: an arm of a claim about out-of-distribution cells has a model
  whose in-distribution exact match lies below `LEARNED_FLOOR`; a comparison between models that
  never learned their task decides nothing, so nothing is compared (the arm and its ID rate are
  named);
* **shown**: the intervals separate in the claim's direction; a claim that a rate stays below a
  threshold needs its `control` (the paper's contrast, trained in the same sweep) above it;
* **contradicted**: among arms that learned, a comparison's intervals separate the other way, or a
  rate clearly breaks a below-threshold claim. An at-least threshold comes from the paper's
  numbers, so missing it contradicts only at the paper's scale;
* **not shown at this scale**: anything else (intervals overlap, a paper-scale threshold missed at a
  smaller scale, an arm or cell missing).

Where every arm holds two or more training seeds, the seed spread must separate too (each seed's
pooled rate: the lowest of one arm above the highest of the other), because a training seed moves a
rate by more than the evaluation's sampling error does. The verdict and the numbers that decide it,
each arm's ID rate beside its rate on the claim's cells, form the sweep's `Conclusion:` line, with
what the paper reports for the same arms and cells (`paper`) beside them. Pandas is imported only
where a verdict is computed, so that a figure module declaring its claim stays cheap to import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

SHOWN = "shown"
CONTRADICTED = "contradicted"
NOT_SHOWN = "not shown at this scale"
NOT_LEARNED = "not learned at this scale"
VERDICTS = (SHOWN, CONTRADICTED, NOT_SHOWN, NOT_LEARNED)
# The in-distribution exact match every model of an arm must reach before its out-of-distribution
# cells are compared. The paper's models are near 100 % ID; 90 % is the share this project has
# called "learned" since its first tiny runs (docs/results.md, the demo).
LEARNED_FLOOR = 0.9
# Result columns that are evaluation settings, not models: an arm picked by one (Fig. 15's first
# recurrence) is a reading of a model, whose learning is judged at its best setting.
EVAL_SETTINGS = ("recurrences",)
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

        if self.below and self.control is None:
            raise ValueError(f"{self.figure}: a claim that rates stay below a threshold needs a "
                             "control arm (the paper's contrast) above it, or an untrained model "
                             "would show it")
        if self.control is not None and not self.below:
            raise ValueError(f"{self.figure}: a control arm belongs to a below-threshold claim")

    def all_arms(self) -> tuple[Arm, ...]:
        return (tuple(a for pair in self.pairs for a in pair) + self.arms
                + ((self.control,) if self.control is not None else ()))

    @property
    def checks_learning(self) -> bool:
        """Whether arms must have learned first: every claim but one about ID cells themselves."""
        return self.cells.view != "id"


@dataclass(frozen=True)
class Across:
    """A claim whose arms live in two sweeps (Fig. 16's unmasked models against Fig. 3's masked
    ones): judged on this sweep's rows together with those of `sweeps`, whose trials must match this
    sweep's in everything the arms do not select (the same tiny settings, seeds and data)."""

    claim: Claim
    sweeps: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    verdict: str  # one of VERDICTS
    evidence: str

    def line(self) -> str:
        """`Conclusion (Fig. N): CLAIM: VERDICT — EVIDENCE`, then the paper's value beside ours."""
        paper = f" (paper: {self.claim.paper})" if self.claim.paper else ""
        return (
            f"Conclusion ({self.claim.figure}): {self.claim.text}: {self.verdict} — "
            f"{self.evidence}{paper}"
        )


@dataclass(frozen=True)
class Learned:
    """An arm's in-distribution exact match: pooled over its models, and its weakest model's (each
    model at its best evaluation setting)."""

    hit: int
    n: int
    lowest: float
    models: int

    def reaches(self, floor: float) -> bool:
        return self.lowest >= floor

    def text(self) -> str:
        weakest = f", weakest of {self.models} models {pct(self.lowest)}" if self.models > 1 else ""
        return f"ID {pct(self.hit / self.n)}{weakest}"


@dataclass(frozen=True)
class Rate:
    """An arm's pooled rate and interval, its per-seed rates and (where checked) its ID rate."""

    label: str
    hit: int
    n: int
    lo: float
    hi: float
    seeds: tuple[float, ...]
    learned: Learned | None = None

    @property
    def p(self) -> float:
        return self.hit / self.n

    def text(self) -> str:
        ident = f" ({self.learned.text()})" if self.learned is not None else ""
        return (
            f"{self.label}{ident} {pct(self.p)} [{100 * self.lo:.1f}, {100 * self.hi:.1f}] "
            f"({self.hit:,}/{self.n:,})"
        )


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def judge(claim: Claim, cells: pd.DataFrame, *, paper_scale: bool = False) -> Verdict:
    """The claim's verdict on `cells` (result rows of one sweep) with the numbers that decide it.
    `paper_scale`: the sweep ran at the scale the paper's thresholds come from, so missing one
    contradicts the claim instead of leaving it not shown."""
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
        for verdict, text in _group_outcomes(claim, group, paper_scale):
            outcomes.append((verdict, f"{prefix}: {text}" if prefix else text))
    return Verdict(claim, overall({v for v, _ in outcomes}),
                   f"{claim.cells.label}: " + "; ".join(t for _, t in outcomes))


def per_seed(claim: Claim, cells: pd.DataFrame, *,
             paper_scale: bool = False) -> list[tuple[int, str]]:
    """The claim judged on each training seed's models alone, where the rows hold two or more
    seeds (empty otherwise): how often the verdict flips with the seed."""
    if "seed" not in cells.columns or cells["seed"].nunique() < 2:
        return []
    return [(int(s), judge(claim, g, paper_scale=paper_scale).verdict)
            for s, g in cells.groupby("seed", sort=True)]


def overall(verdicts: set[str]) -> str:
    """One verdict from its parts': any contradiction (among arms that learned) stands; shown needs
    every part shown; otherwise an arm that never learned explains it before anything else."""
    if CONTRADICTED in verdicts:
        return CONTRADICTED
    if verdicts == {SHOWN}:
        return SHOWN
    return NOT_LEARNED if NOT_LEARNED in verdicts else NOT_SHOWN


def _group_outcomes(claim: Claim, group: pd.DataFrame,
                    paper_scale: bool) -> list[tuple[str, str]]:
    if claim.pairs:
        return [_compare(claim, group, a, b) for a, b in claim.pairs]
    out = [_against_threshold(claim, group, arm, paper_scale) for arm in claim.arms]
    if claim.control is not None:
        out.append(_control(claim, group, claim.control))
    return out


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


def rate(rows: pd.DataFrame, label: str, score: str, learned: Learned | None = None) -> Rate:
    """The pooled rate of `rows` with its Wilson interval, and each training seed's pooled rate."""
    from abacus_ray.evaluation.aggregate import wilson_interval

    hits = rows[SCORES[score]]
    hit, n = int(hits.sum()), int(rows["n"].sum())
    lo, hi = wilson_interval(hit, n)
    seeds: tuple[float, ...] = ()
    if "seed" in rows.columns and rows["seed"].nunique() > 1:
        by = rows.assign(_hit=hits).groupby("seed")[["_hit", "n"]].sum()
        seeds = tuple(float(h / m) for h, m in zip(by["_hit"], by["n"], strict=True))
    return Rate(label, hit, n, lo, hi, seeds, learned)


def learned(group: pd.DataFrame, arm: Arm, arm_rows: pd.DataFrame) -> Learned | None:
    """The in-distribution exact match of the models in `arm_rows` (an arm's rows in `group`): the
    arm's selection but its evaluation settings, each model at its best setting. None where no ID
    cell of them was evaluated."""
    where = {c: v for c, v in arm.where.items() if c not in EVAL_SETTINGS}
    rows, _ = select(group, Arm(arm.label, where))
    rows = in_cells(rows[rows["model_id"].isin(set(arm_rows["model_id"]))], Cells("ID", view="id"))
    if rows.empty:
        return None
    settings = ["model_id", *(c for c in EVAL_SETTINGS if c in rows.columns)]
    by = rows.groupby(settings)[["n_correct", "n"]].sum()
    by["p"] = by["n_correct"] / by["n"]
    best = by.sort_values("p", kind="stable").groupby(level="model_id").tail(1)
    return Learned(int(best["n_correct"].sum()), int(best["n"].sum()), float(best["p"].min()),
                   len(best))


def _arm_rows(group: pd.DataFrame, arm: Arm) -> tuple[pd.DataFrame, str, str | None]:
    rows, label = select(group, arm)
    if rows.empty:
        return rows, label, f"no results of {label} ({_where(arm)})"
    return rows, label, None


def _unlearned(claim: Claim, rates: tuple[Rate, ...]) -> tuple[str, str] | None:
    """NOT_LEARNED naming the arms below the floor, or NOT_SHOWN where an arm's ID cells are
    missing; None where every arm learned or the claim is about ID cells."""
    if not claim.checks_learning:
        return None
    unknown = [r.label for r in rates if r.learned is None]
    if unknown:
        return NOT_SHOWN, (f"whether {unknown[0]} learned its task is unknown: no in-distribution "
                           "cell of it was evaluated")
    short = [r for r in rates if r.learned is not None and not r.learned.reaches(LEARNED_FLOOR)]
    if short:
        names = " and ".join(r.label for r in short)
        return NOT_LEARNED, f"{names} under the {pct(LEARNED_FLOOR)} ID floor: nothing compared"
    return None


def _compare(claim: Claim, group: pd.DataFrame, arm_a: Arm, arm_b: Arm) -> tuple[str, str]:
    a, label_a, why = _arm_rows(group, arm_a)
    if why:
        return NOT_SHOWN, why
    b, label_b, why = _arm_rows(group, arm_b)
    if why:
        return NOT_SHOWN, why
    if a.index.equals(b.index):
        return NOT_SHOWN, f"{label_a} and {label_b} are the same results: nothing to compare"
    ids = ((learned(group, arm_a, a), learned(group, arm_b, b)) if claim.checks_learning
           else (None, None))
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
    ra, rb = rate(a, label_a, claim.score, ids[0]), rate(b, label_b, claim.score, ids[1])
    up, down = ra.lo > rb.hi, rb.lo > ra.hi
    apart = "separate" if up or down else "overlap"
    lo, hi = difference_interval(ra, rb)
    text = (f"{where}{ra.text()} vs {rb.text()} (intervals {apart}; difference "
            f"{100 * (ra.p - rb.p):+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}])")
    if ra.seeds and rb.seeds:
        up, down = up and min(ra.seeds) > max(rb.seeds), down and min(rb.seeds) > max(ra.seeds)
        text += f"; over seeds {_spread(ra)} vs {_spread(rb)}"
    if (short := _unlearned(claim, (ra, rb))) is not None:
        return short[0], f"{text}; {short[1]}"
    return (SHOWN if up else CONTRADICTED if down else NOT_SHOWN), text


def _threshold_rate(claim: Claim, group: pd.DataFrame, arm: Arm) -> tuple[Rate | None, str]:
    """An arm's rate on the claim's cells (its best model's for a `best` claim), or why none."""
    rows, label, why = _arm_rows(group, arm)
    if why:
        return None, why
    cells = in_cells(rows, claim.cells)
    if cells.empty:
        return None, f"no cell of {label} was evaluated"
    if not claim.best:
        ident = learned(group, arm, rows) if claim.checks_learning else None
        return rate(cells, label, claim.score, ident), ""
    key = "name" if "name" in cells.columns else "model_id"
    rates = []
    for k, g in cells.groupby(key, sort=True):
        ident = (learned(group, arm, rows[rows[key] == k]) if claim.checks_learning else None)
        rates.append(rate(g, f"{label} ({k})", claim.score, ident))
    return max(rates, key=lambda x: (x.p, x.n)), ""


def _side(r: Rate, t: float) -> tuple[bool, bool]:
    """Whether `r` lies clearly at or above `t`, and clearly under it (every seed too)."""
    above, under = r.lo >= t, r.hi < t
    if r.seeds:
        above, under = above and min(r.seeds) >= t, under and max(r.seeds) < t
    return above, under


def _against_threshold(claim: Claim, group: pd.DataFrame, arm: Arm,
                       paper_scale: bool) -> tuple[str, str]:
    r, why = _threshold_rate(claim, group, arm)
    if r is None:
        return NOT_SHOWN, why
    t = claim.threshold
    above, under = _side(r, t)
    shown, against = (under, above) if claim.below else (above, under)
    text = r.text() + (f"; over seeds {_spread(r)}" if r.seeds else "")
    text += f" against {'<' if claim.below else '>='} {100 * t:g} %"
    if (short := _unlearned(claim, (r,))) is not None:
        return short[0], f"{text}; {short[1]}"
    if against and not claim.below and not paper_scale:
        return NOT_SHOWN, f"{text}, a paper-scale threshold missed at this scale"
    return (SHOWN if shown else CONTRADICTED if against else NOT_SHOWN), text


def _control(claim: Claim, group: pd.DataFrame, arm: Arm) -> tuple[str, str]:
    """A below-threshold claim's positive control: the paper's contrast, which must have learned
    and lie clearly above the threshold, or the low rates show nothing."""
    r, why = _threshold_rate(claim, group, arm)
    if r is None:
        return NOT_SHOWN, f"positive control: {why}"
    t = claim.threshold
    above, _ = _side(r, t)
    text = (f"positive control {r.text()}"
            + (f"; over seeds {_spread(r)}" if r.seeds else "") + f" against >= {100 * t:g} %")
    if (short := _unlearned(claim, (r,))) is not None:
        return short[0], f"{text}; {short[1]}"
    if not above:
        return NOT_SHOWN, f"{text}, not above it: the contrast is not shown"
    return SHOWN, text


def difference_interval(a: Rate, b: Rate) -> tuple[float, float]:
    """The 95 % interval of `a.p - b.p` from the two Wilson intervals (Newcombe's hybrid score
    method): the effect a compute trend follows, with its uncertainty."""
    d = a.p - b.p
    return (d - ((a.p - a.lo) ** 2 + (b.hi - b.p) ** 2) ** 0.5,
            d + ((a.hi - a.p) ** 2 + (b.p - b.lo) ** 2) ** 0.5)


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

