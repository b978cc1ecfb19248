"""Fig. 10 — varying the Abacus offset k.

"Left: 5 models trained with offset hyperparameter k = 100 (101 offsets) on size-20 addition;
accuracy on the i = j diagonal up to 120 digits. Right: models trained with k = 25, 50, 75 and 100:
extrapolation grows with k." Architecture: the 8 x 2 looped transformer with input injection and
Abacus embeddings (docs/official-code.md §10). Evaluated on the diagonal up to
120 and the 100 x 100 grid.

Tiny (`make demo`): a 2-layer model on size-5 addition with k = 1 and k = 12, scored on the 1..5
square and the diagonal to 20 digits, past both models' trained positions (why these settings:
docs/results.md, §2c). The claim compares the two on the lengths between their trained positions'
ends.
"""

from abacus_ray.evaluation.claims import MAX, MIN, Arm, Cells, Claim
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="fig10_k",
    caption=__doc__.splitlines()[0],
    base={
        "task.name": "add",
        "task.train_max_len": 20,
        "model.positions": "abacus",
        "model.layers": 8,
        "model.recurrences": 2,
        "model.injection": "every",
    },
    axes={"model.max_k": [25, 50, 75, 100]},
    seeds=5,
    grids=("diagonal:1-120", "paper-addition"),
    tiny=Scale(
        overrides={
            "task.train_max_len": 5,
            "model.layers": 2,
            "model.recurrences": 1,
            **CPU_SCALE,
            "train.global_batch": 64,
            "train.micro_batch": 64,
            "eval.per_cell": 300,
        },
        axes={"model.max_k": [1, 12]},
        seeds=1,
        grids=("cells:1-5x1-5", "diagonal:1-20"),
    ),
)

CLAIM = Claim(
    "Fig. 10",
    "a larger Abacus offset k solves lengths past where a smaller k's trained positions end, n + k"
    " + 1 digits",
    Cells("i = j", past_positions=True),
    paper="read from the plot: extrapolation grows with k = 25, 50, 75, 100 on size-20 addition",
    pairs=((Arm("largest k", {"model.max_k": MAX}), Arm("smallest k", {"model.max_k": MIN})),),
)
