"""Fig. 15 — what a looped model predicts after each recurrence.

"A 1 x 16 looped transformer with Abacus embeddings trained on size-20
addition, decoding a 100-digit
problem: the prediction after each of the 16 recurrences." The sweep trains the model and scores the
100-digit diagonal cell with test-time recurrences 1..16 (one results row each, `recurrences`
column); `abacus-ray eval CKPT --diagonal 100 --recurrences R --samples` gives the predictions. The
in-distribution diagonal is scored too, so that the verdict knows the model learned its task.

Tiny: a 1 x 4 model on size-5 addition, 12-digit cell, recurrences 1..4.
"""

from abacus_ray.config.model import looped
from abacus_ray.evaluation.claims import MAX, MIN, Arm, Cells, Claim
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="fig15_recurrence_outputs",
    caption=__doc__.splitlines()[0],
    base={
        "task.name": "add",
        "task.train_max_len": 20,
        "model.positions": "abacus",
        **looped(1, 16),
    },
    seeds=1,
    grids=("diagonal:1-20,100",),
    eval_recurrences=tuple(range(1, 17)),
    tiny=Scale(
        overrides={**CPU_SCALE, "task.train_max_len": 5, **looped(1, 4)},
        grids=("diagonal:1-5,12",),
        eval_recurrences=(1, 2, 3, 4),
    ),
)

CLAIM = Claim(
    "Fig. 15",
    "a looped model's answer improves over its recurrences: more problems right after the last "
    "than after the first",
    Cells("the long i = j cell", view="ood", diagonal=True),
    paper="read from the plot: a 1 x 16 model's 100-digit prediction, plotted per recurrence",
    pairs=(
        (
            Arm("last recurrence", {"recurrences": MAX}),
            Arm("first recurrence", {"recurrences": MIN}),
        ),
    ),
)
