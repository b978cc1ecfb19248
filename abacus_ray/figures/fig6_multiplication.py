"""Fig. 6 — multiplication with Abacus, Abacus+FIRE and FIRE.

"Looped transformers (4 x 4, input injection only before each recurrence) trained on up to
15 x 15-digit multiplication, evaluated on the 25 x 25 grid, the red square marking training."
Official shells: throttle on, loss_reduction none, lr 6e-5 with FIRE (docs/official-code.md §6.2,
§10), 8 GPUs for 24 hours: the paper's 64 exaFLOP, 192 RTX A4000-hours (Table 4). The budget is
those 192 A4000-hours of model FLOPs, however many workers train a model: 8 workers (DDP,
micro-batch 512 each) train the same samples as one would, in about an eighth of the wall time.

Tiny: a 2-layer model on up to 3 x 3-digit products, 1..6 square, one seed.
"""

from abacus_ray.config.model import looped
from abacus_ray.evaluation.claims import Cells, Claim, embedding
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="fig6_multiplication",
    caption=__doc__.splitlines()[0],
    base={
        "task.name": "mul",
        "task.train_max_len": 15,
        "train.throttle": True,
        "train.loss_reduction": "none",
        **looped(4, 4, injection="first"),
    },
    variants=[
        {"model.positions": "abacus"},
        {"model.positions": "abacus+fire", "train.lr": 6e-5},
        {"model.positions": "fire", "train.lr": 6e-5},
    ],
    seeds=3,
    grids=("paper-multiplication",),
    paper=Scale(
        overrides={"cluster.workers": 8, "cluster.use_gpu": True, "train.budget_a4000_hours": 192.0}
    ),
    tiny=Scale(
        overrides={
            **CPU_SCALE,
            "task.train_max_len": 3,
            "model.layers": 2,
            "model.recurrences": 1,
        },
        variants=[{"model.positions": p} for p in ("abacus", "abacus+fire", "fire")],
        seeds=1,
        grids=("cells:1-6x1-6",),
    ),
)

CLAIM = Claim(
    "Fig. 6",
    "Abacus learns multiplication in distribution better than FIRE",
    Cells("ID", view="id"),
    paper=(
        "read from the plot: Abacus near 100 % on the 15 x 15 square; FIRE fails its hardest "
        "problems"
    ),
    pairs=((embedding("abacus"), embedding("fire")),),
)
