"""Every figure's claim and its verdict (abacus_ray/evaluation/claims.py): comparisons and
thresholds on made-up cell tables (pure pandas, no training), the learned floor, paper-scale
thresholds and positive controls, the seed-spread rule, Fig. 10's offsets, and every figure module's
claim against its own sweep's expansion. Where users read verdicts (summary, dashboard):
tests/test_claims_summary.py."""

from __future__ import annotations

import hashlib
import re

import pandas as pd
import pytest

from abacus_ray import figures
from abacus_ray.config.dicts import flatten
from abacus_ray.evaluation.claims import (
    CONTRADICTED,
    MAX,
    MIN,
    NOT_LEARNED,
    NOT_SHOWN,
    SHOWN,
    Arm,
    Cells,
    Claim,
    embedding,
    judge,
    select,
)
from abacus_ray.evaluation.regions import region_of, views_for

OOD = Cells("OOD", view="ood")
VERSUS = Claim(
    "Fig. 3", "Abacus beats FIRE", OOD, pairs=((embedding("abacus"), embedding("fire")),)
)
AT_LEAST = Claim("Fig. 19", "Abacus reaches 90 %", OOD, arms=(embedding("abacus"),), threshold=0.9)


def _model(
    correct: dict[tuple[int, int], int],
    per_cell: int = 100,
    n_train: int = 5,
    seed: int = 0,
    **columns,
) -> list[dict]:
    """One model's cell rows: `correct` problems of `per_cell` in each (i, j)."""
    key = f"{sorted(columns.items())}|{seed}|{n_train}"
    model_id = hashlib.sha256(key.encode()).hexdigest()
    return [
        {
            "model_id": model_id,
            "name": f"fig/{key}",
            "seed": seed,
            "task": "add",
            "i": i,
            "j": j,
            "region": region_of("add", i, j, n_train),
            "n_train": n_train,
            "task.train_max_len": n_train,
            "n": per_cell,
            "n_correct": c,
            "n_first_correct": c,
            "accuracy": c / per_cell,
            "per_cell": per_cell,
            "eval_seed": 0,
            "recurrences": 1,
            **columns,
        }
        for (i, j), c in correct.items()
    ]


def _ood(c: int) -> dict[tuple[int, int], int]:
    """Ten OOD cells (6..10 digits, both orders) with `c` of 100 right each, and one ID cell."""
    return {(1, 1): 100} | {(n, 1): c for n in range(6, 11)} | {(1, n): c for n in range(6, 11)}


def _table(*models: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([r for m in models for r in m])


def test_a_comparison_is_shown_where_the_intervals_separate_in_its_direction():
    rows = _table(
        _model(_ood(60), **{"model.positions": "abacus"}),
        _model(_ood(2), **{"model.positions": "fire"}),
    )
    v = judge(VERSUS, rows)
    assert v.verdict == SHOWN
    assert (
        "Abacus (ID 100.0 %) 60.0 % [56.9, 63.0] (600/1,000) vs FIRE (ID 100.0 %) 2.0 % [1.3, 3.1] "
        "(20/1,000)" in v.evidence
    )
    assert v.line().startswith("Conclusion (Fig. 3): Abacus beats FIRE: shown — OOD: ")
    assert "(paper:" not in v.line()  # a claim without the paper's value says nothing of it
    with_paper = judge(dataclass_replace(VERSUS, paper="OOD: Abacus 97.9 %, FIRE 2.9 %"), rows)
    assert with_paper.line() == v.line() + " (paper: OOD: Abacus 97.9 %, FIRE 2.9 %)"


def test_a_comparison_is_contradicted_where_they_separate_the_other_way():
    v = judge(
        VERSUS,
        _table(
            _model(_ood(2), **{"model.positions": "abacus"}),
            _model(_ood(60), **{"model.positions": "fire"}),
        ),
    )
    assert (
        v.verdict == CONTRADICTED
        and "Abacus (ID 100.0 %) 2.0 %" in v.evidence
        and "(intervals separate; difference -58.0 points [-61.1, -54.8])" in v.evidence
    )


def test_overlapping_intervals_decide_nothing():
    v = judge(
        VERSUS,
        _table(
            _model(_ood(31), **{"model.positions": "abacus"}),
            _model(_ood(29), **{"model.positions": "fire"}),
        ),
    )
    assert v.verdict == NOT_SHOWN and "(intervals overlap; difference +2.0 points [-2.0, +6.0])" in v.evidence
    assert v.line().startswith("Conclusion (Fig. 3): Abacus beats FIRE: not shown at this scale")


def test_a_missing_arm_or_region_is_not_shown_and_named():
    v = judge(VERSUS, _table(_model(_ood(60), **{"model.positions": "abacus"})))
    assert v.verdict == NOT_SHOWN and "no results of FIRE (model.positions = fire)" in v.evidence
    only_id = _table(
        _model({(1, 1): 100}, **{"model.positions": "abacus"}),
        _model({(1, 1): 100}, **{"model.positions": "fire"}),
    )
    v = judge(VERSUS, only_id)
    assert v.verdict == NOT_SHOWN and "no cell of Abacus was evaluated" in v.evidence
    v = judge(VERSUS, only_id.drop(columns=["model.positions"]))
    assert v.verdict == NOT_SHOWN and "no 'model.positions' column" in v.evidence


@pytest.mark.parametrize(
    ("correct", "per_cell", "paper_scale", "verdict"),
    [
        (95, 100, False, SHOWN),  # 950 of 1,000: the interval lies above 90 %
        (50, 100, True, CONTRADICTED),  # under it, at the scale the threshold comes from
        (50, 100, False, NOT_SHOWN),  # under it at a smaller scale: a paper-scale bar, missed
        (9, 10, True, NOT_SHOWN),  # 90 of 100: the interval straddles it
    ],
)
def test_a_threshold_claim(correct, per_cell, paper_scale, verdict):
    v = judge(
        AT_LEAST, _table(_model(_ood(correct), per_cell=per_cell, **{"model.positions": "abacus"})),
        paper_scale=paper_scale,
    )
    assert v.verdict == verdict and "against >= 90 %" in v.evidence
    assert ("a paper-scale threshold missed at this scale" in v.evidence) == (
        correct == 50 and not paper_scale
    )


BELOW = Claim(
    "Fig. 21", "hints stay low", OOD, arms=(embedding("fire"),), threshold=0.25, below=True,
    control=embedding("abacus"),
)


def test_a_threshold_below_needs_its_positive_control_above_it():
    with pytest.raises(ValueError, match="needs a control arm"):
        Claim("Fig. 21", "stays low", OOD, arms=(Arm("every model"),), threshold=0.25, below=True)
    control = _model(_ood(60), **{"model.positions": "abacus"})
    low = judge(BELOW, _table(_model(_ood(5), **{"model.positions": "fire"}), control))
    high = judge(BELOW, _table(_model(_ood(60), **{"model.positions": "fire"}), control))
    assert (low.verdict, high.verdict) == (SHOWN, CONTRADICTED) and "against < 25 %" in low.evidence
    assert "positive control Abacus (ID 100.0 %) 60.0 %" in low.evidence
    # the contrast missing or under the threshold: low rates alone show nothing
    weak = judge(BELOW, _table(_model(_ood(5), **{"model.positions": "fire"}),
                               _model(_ood(10), **{"model.positions": "abacus"})))
    assert weak.verdict == NOT_SHOWN and "not above it: the contrast is not shown" in weak.evidence
    alone = judge(BELOW, _table(_model(_ood(5), **{"model.positions": "fire"})))
    assert alone.verdict == NOT_SHOWN and "positive control: no results of Abacus" in alone.evidence


def _unlearned(c: int, id_correct: int = 40, **columns) -> list[dict]:
    """A model that solves `id_correct` of 100 in its ID cell and `c` of 100 in each OOD cell."""
    return _model(_ood(c) | {(1, 1): id_correct}, **columns)


def test_an_arm_below_the_learned_floor_decides_nothing_and_is_named():
    # FIRE never learned its task: its OOD rate, even far above Abacus's, contradicts nothing
    v = judge(VERSUS, _table(_model(_ood(2), **{"model.positions": "abacus"}),
                             _unlearned(60, **{"model.positions": "fire"})))
    assert v.verdict == NOT_LEARNED
    assert "FIRE (ID 40.0 %) 60.0 %" in v.evidence
    assert v.evidence.endswith("; FIRE under the 90.0 % ID floor: nothing compared")
    assert v.line().startswith("Conclusion (Fig. 3): Abacus beats FIRE: not learned at this scale")
    # an untrained model under a below-threshold claim, and beside a learned control
    v = judge(BELOW, _table(_unlearned(0, id_correct=0, **{"model.positions": "fire"}),
                            _model(_ood(60), **{"model.positions": "abacus"})))
    assert v.verdict == NOT_LEARNED and "FIRE (ID 0.0 %)" in v.evidence
    v = judge(AT_LEAST, _table(_unlearned(95, id_correct=89, **{"model.positions": "abacus"})))
    assert v.verdict == NOT_LEARNED
    # an ID claim is about learning itself: no floor
    on_id = dataclass_replace(VERSUS, cells=Cells("ID", view="id"))
    v = judge(on_id, _table(_unlearned(0, id_correct=60, **{"model.positions": "abacus"}),
                            _unlearned(0, id_correct=20, **{"model.positions": "fire"})))
    assert v.verdict == SHOWN and "(ID " not in v.evidence


def test_every_seed_of_an_arm_must_have_learned():
    rows = _table(_model(_ood(60), seed=0, **{"model.positions": "abacus"}),
                  _unlearned(60, id_correct=80, seed=1, **{"model.positions": "abacus"}),
                  _model(_ood(2), seed=0, **{"model.positions": "fire"}),
                  _model(_ood(3), seed=1, **{"model.positions": "fire"}))
    v = judge(VERSUS, rows)
    assert v.verdict == NOT_LEARNED
    assert "Abacus (ID 90.0 %, weakest of 2 models 80.0 %)" in v.evidence


def test_an_arm_without_id_cells_is_not_judged_learned():
    rows = _table(_model(_ood(60), **{"model.positions": "abacus"}),
                  _model(_ood(2), **{"model.positions": "fire"}))
    v = judge(VERSUS, rows[~((rows["i"] == 1) & (rows["j"] == 1))])
    assert v.verdict == NOT_SHOWN and "whether Abacus learned its task is unknown" in v.evidence


def test_an_arm_read_at_an_eval_setting_is_judged_learned_at_the_models_best():
    """Fig. 15: the first recurrence of a learned looped model is a reading, not a model."""
    claim = figures.claim("fig15_recurrence_outputs")
    last = _model({(1, 1): 20, (12, 12): 15}, per_cell=20, **{"model.positions": "abacus"})
    last = [r | {"recurrences": 4} for r in last]
    first = [r | {"recurrences": 1, "n_correct": c, "n_first_correct": c}
             for r, c in zip(last, (2, 0), strict=True)]
    v = judge(claim, _table(last, first))
    assert v.verdict == SHOWN, v.evidence
    assert "first recurrence (recurrences = 1) (ID 100.0 %) 0.0 %" in v.evidence


def test_the_best_model_decides_a_best_of_threshold():
    claim = Claim(
        "Beyond the paper",
        "some model reaches 90 %",
        OOD,
        arms=(Arm("the best model"),),
        threshold=0.9,
        best=True,
    )
    rows = _table(_model(_ood(97), max_k=30), _model(_ood(10), max_k=10))
    assert judge(claim, rows).verdict == SHOWN
    assert (
        judge(dataclass_replace(claim, best=False), rows, paper_scale=True).verdict == CONTRADICTED
    )  # pooled: 53.5 %


def dataclass_replace(claim: Claim, **changes) -> Claim:
    import dataclasses

    return dataclasses.replace(claim, **changes)


def test_with_seeds_the_seed_spread_must_separate_too():
    def arm(positions, rates):
        return [
            r
            for s, c in enumerate(rates)
            for r in _model(_ood(c), seed=s, **{"model.positions": positions})
        ]

    # pooled 60 % against 20 %: the intervals separate, but Abacus's seed 1 (30 %) is below FIRE's
    # seed 0 (35 %)
    v = judge(VERSUS, _table(arm("abacus", (90, 30)), arm("fire", (35, 5))))
    assert v.verdict == NOT_SHOWN
    assert "over seeds 30.0 %-90.0 % (2 seeds) vs 5.0 %-35.0 % (2 seeds)" in v.evidence
    v = judge(VERSUS, _table(arm("abacus", (90, 50)), arm("fire", (35, 5))))
    assert v.verdict == SHOWN
    v = judge(
        AT_LEAST, _table(arm("abacus", (99, 85))), paper_scale=True
    )  # pooled 92 % [90.7, 93.1], one seed at 85 %
    assert v.verdict == NOT_SHOWN and "over seeds 85.0 %-99.0 %" in v.evidence


def test_picks_resolve_among_the_rows_left_and_within_groups_must_all_hold():
    claim = Claim(
        "Fig. 9",
        "longer training extrapolates further",
        OOD,
        within=("model.positions",),
        pairs=(
            (
                Arm("longest", {"task.train_max_len": MAX}),
                Arm("shortest", {"task.train_max_len": MIN}),
            ),
        ),
    )
    rows = _table(
        _model(_ood(80), n_train=5, **{"model.positions": "abacus"}),
        _model(
            {(1, 1): 100} | {(n, n): 10 for n in range(4, 9)},
            n_train=3,
            **{"model.positions": "abacus"},
        ),
    )
    v = judge(claim, rows)
    assert (
        v.verdict == SHOWN
        and "positions = abacus: longest (train_max_len = 5) (ID 100.0 %) 80.0 %" in v.evidence
    )
    assert "shortest (train_max_len = 3) (ID 100.0 %) 10.0 %" in v.evidence
    fire = _table(
        _model(_ood(10), n_train=5, **{"model.positions": "fire"}),
        _model(_ood(12), n_train=3, **{"model.positions": "fire"}),
    )
    assert judge(claim, pd.concat([rows, fire])).verdict == NOT_SHOWN  # FIRE's group overlaps
    arm_rows, label = select(rows, Arm("shortest", {"task.train_max_len": MIN}))
    assert set(arm_rows["task.train_max_len"]) == {3} and label == "shortest (train_max_len = 3)"


def _offsets(k12_window: int) -> pd.DataFrame:
    """Fig. 10 at tiny scale: k = 1 and k = 12 on size-5 addition, the 1..5 square and the diagonal
    to 20; k = 12 solves `k12_window` of 300 per length from 7 (where k = 1's trained positions end)
    to 17."""
    square = {(i, j): 297 for i in range(1, 6) for j in range(1, 6)}
    k1 = square | {(n, n): (150 if n == 6 else 0) for n in range(6, 21)}
    k12 = square | {(n, n): (200 if n == 6 else k12_window if n < 18 else 0) for n in range(6, 21)}
    return _table(
        _model(k1, per_cell=300, **{"model.max_k": 1, "model.positions": "abacus"}),
        _model(k12, per_cell=300, **{"model.max_k": 12, "model.positions": "abacus"}),
    )


def test_fig10_compares_the_offsets_between_their_trained_positions_ends():
    claim = figures.claim("fig10_k")
    v = judge(claim, _offsets(75))
    assert v.verdict == SHOWN
    assert (
        "i = j: at 7-17 digits, past k = 1's trained positions, before k = 12's: "
        "largest k (max_k = 12) (ID 99.0 %) "
        "25.0 % [23.6, 26.5] (825/3,300) vs smallest k (max_k = 1) (ID 99.0 %) 0.0 % [0.0, 0.1] "
        "(0/3,300)"
    ) in v.evidence
    assert v.line().startswith(
        "Conclusion (Fig. 10): a larger Abacus offset k solves lengths past where"
    )
    assert judge(claim, _offsets(0)).verdict == NOT_SHOWN  # both at 0 of 3,300
    one_k = _offsets(75)
    v = judge(claim, one_k[one_k["model.max_k"] == 12])
    assert v.verdict == NOT_SHOWN and "the same results" in v.evidence


def _expanded_columns(name: str, preset_name: str) -> pd.DataFrame:
    """One row per trial of figure `name` at `preset_name`: every config column, and the result
    columns a claim may select by (`task`: the problems' task; `recurrences`: the test-time
    recurrences scored)."""
    sweep = figures.figure(name)
    rows = []
    for t in sweep.expand(preset_name):
        cols = flatten(t.config.to_dict())
        tasks = ("add", "sub") if cols["task.name"] == "addsub" else (cols["task.name"],)
        recs = sweep.eval_recurrences_for(preset_name) or (t.config.model.test_recurrences,)
        rows += [cols | {"task": task, "recurrences": r} for task in tasks for r in recs]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("name", figures.names())
def test_every_figure_claims_what_its_own_sweep_can_decide(name):
    claim = figures.claim(name)
    assert isinstance(claim, Claim) and claim.text and claim.figure
    for preset_name in ("tiny", "paper"):
        trials = _expanded_columns(name, preset_name)
        assert all(c in trials.columns for c in claim.within), (name, claim.within)
        for arm in claim.all_arms():
            missing = [c for c in arm.where if c not in trials.columns]
            assert not missing, (
                f"{name}: arm {arm.label!r} names {missing}, not a column of its results"
            )
            assert not select(trials, arm)[0].empty, (
                f"{name} ({preset_name}): arm {arm.label!r} selects no trial"
            )
        for a, b in claim.pairs:
            assert not select(trials, a)[0].index.equals(select(trials, b)[0].index), (
                name,
                a.label,
                b.label,
            )
        if claim.cells.view is not None:
            assert all(claim.cells.view in views_for(t) for t in set(trials["task"])), (
                name,
                claim.cells.view,
            )
        if claim.cells.past_positions:
            assert trials["model.positions"].str.startswith("abacus").all()
    assert figures.claim(f"{name}_confirm") == claim  # a search's confirmation answers its claim
    assert figures.claim("no_such_figure") is None


@pytest.mark.parametrize("name", figures.names())
def test_every_figure_claim_keeps_the_papers_value_apart_from_its_words(name):
    """The paper's value lives in `paper`; the claim's text keeps words and its own criterion (a
    threshold's percentage), no number the paper reports."""
    claim = figures.claim(name)
    assert claim.paper.strip(), f"{name}: no paper value"
    assert "paper" not in claim.text, (name, claim.text)
    own = {f"{100 * claim.threshold:g}"} if claim.threshold is not None else set()
    percents = set(re.findall(r"(\d+(?:\.\d+)?) ?%", claim.text))
    assert percents <= own, f"{name}: {sorted(percents - own)} % in its text, not its threshold"
    assert f"(paper: {claim.paper})" in judge(claim, pd.DataFrame()).line()
