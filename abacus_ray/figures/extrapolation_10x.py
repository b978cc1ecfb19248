"""Beyond the paper — 10x length generalisation for addition, found by a search.

Abacus models trained on <= 20-digit addition reach 99 % up to 100 digits and stop at 120 (6x): with
offsets k <= 100 the highest trained Abacus row is 121, and the largest rows are "updated
infrequently" (Sec. 3). This searches the levers that bound that reach: the largest offset
`model.max_k` (>= 180 at paper scale, so rows up to 221 are trained), how k is drawn (`uniform`, the
paper's, or `balanced`, which trains every row about equally often: model/positions.py), the
training length (data size), depth x recurrence and the budget. Random points of that space run
through Ray Tune; its ASHA scheduler stops the weaker ones at step rungs, ranked by the validation
score (exact match on a few long diagonal cells of a validation set, scored every 500 steps:
evaluation/validation.py). Trials that run their whole budget are scored on the long diagonal (and,
at paper scale, a sparse grid past 100). `--confirm` retrains the best point with 3 seeds under each
offset draw (docs/results.md, "10x").

The tiny preset asks the same question at CPU scale, from 5-digit training: 10 points of 24, 2-layer
models, budgets of 3,000 or 6,000 steps (their cost: docs/results.md, §6), k up to 30 (rows to 36),
validated at 6, 8, 10 and 12 digits, scored on the diagonal to 40 digits.
"""

from abacus_ray.config.model import looped, standard_ii
from abacus_ray.evaluation.claims import Arm, Cells, Claim
from abacus_ray.sweep import SHARE_CORES, STEPS_ONLY, Scale, Search, Sweep

SWEEP = Sweep(
    name="extrapolation_10x",
    caption=__doc__.splitlines()[0],
    base={
        "task.name": "add",
        "model.positions": "abacus",
        "train.budget_a4000_hours": None,
        # one worker per trial, inside its Tune trial: ASHA can stop it cleanly
        "cluster.trainer": "function",
        "eval.validation_lengths": [40, 60, 100, 150, 200],
        "eval.validation_per_cell": 25,
        "eval.validation_every": 500,
    },
    variants=[looped(8, 2), standard_ii(16)],
    axes={
        "model.max_k": [100, 180, 200],
        "model.k_draw": ["uniform", "balanced"],
        "task.train_max_len": [15, 20],
        "train.max_steps": [4000, 8000],
    },
    seeds=1,
    grids=("diagonal:1-220", "cells:101-221:30x101-221:30"),
    search=Search(
        samples=12,
        grace_steps=1000,
        first=({"model.max_k": 100, "model.k_draw": "uniform", "task.train_max_len": 20},),
        compare={"model.k_draw": ["uniform", "balanced"]},
    ),
    tiny=Scale(
        overrides={
            "task.train_max_len": 5,
            "eval.validation_lengths": [6, 8, 10, 12],
            "eval.validation_per_cell": 50,
            "eval.per_cell": 100,
            **STEPS_ONLY,
            **SHARE_CORES,
        },
        variants=[standard_ii(2), looped(1, 2)],
        axes={
            "model.max_k": [10, 20, 30],
            "model.k_draw": ["uniform", "balanced"],
            "train.max_steps": [3000, 6000],
        },
        grids=("diagonal:1-40",),
        search=Search(
            samples=10,
            grace_steps=1000,
            first=(
                {
                    "model.max_k": 20,
                    "model.k_draw": "uniform",
                    "model.layers": 2,
                    "train.max_steps": 6000,
                },
            ),
            compare={"model.k_draw": ["uniform", "balanced"]},
        ),
    ),
)

CLAIM = Claim(
    "Beyond the paper",
    "an Abacus model reaches >= 90 % on i = j at 9-10x its training length",
    Cells("i = j at 9-10x the training length", diagonal=True, lengths=(9, 10)),
    paper="6x the training length: >= 95 % to 120 digits from size-20 data",
    arms=(Arm("the best model", {}),),
    threshold=0.9,
    best=True,
)
