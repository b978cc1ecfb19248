"""Fig. 5 — addition and subtraction in one model.

"8 x 2 looped transformers with Abacus embeddings trained on a mix of size-20 addition and
subtraction; accuracy on the i = j diagonal for + and -, mean of 3 runs." The mix is 1:1 per sample
(the paper's file sizes are unknown, docs/official-code.md §11.1).

Tiny: a 2-layer model on size-5 +/- problems, one seed.
"""

from abacus_ray.config.model import looped
from abacus_ray.evaluation.claims import Arm, Cells, Claim
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="fig5_add_sub",
    caption=__doc__.splitlines()[0],
    base={
        "task.name": "addsub",
        "task.train_max_len": 20,
        "model.positions": "abacus",
        **looped(8, 2),
    },
    seeds=3,
    grids=("diagonal:1-120",),
    tiny=Scale(
        overrides={
            **CPU_SCALE,
            "task.train_max_len": 5,
            "model.layers": 2,
            "model.recurrences": 1,
        },
        seeds=1,
        grids=("diagonal:1-20",),
    ),
)

CLAIM = Claim(
    "Fig. 5",
    "one model adds and subtracts past its training length: >= 90 % on i = j at 1-2x the training "
    "length for each",
    Cells("i = j at 1-2x the training length", diagonal=True, lengths=(1, 2)),
    paper="read from the plot: both extrapolate far from size-20 data",
    arms=(Arm("addition", {"task": "add"}), Arm("subtraction", {"task": "sub"})),
    threshold=0.9,
)
