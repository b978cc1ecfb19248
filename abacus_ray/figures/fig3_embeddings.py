"""Fig. 3 — Abacus, FIRE and NoPE embeddings across architectures.

"Left: mean exact match accuracy of three models of depth sixteen on size-20 addition, OOD and 100+
OOD: standard transformer (ST), standard transformer with input injection (ST w/ II) and looped
transformer (LT, 1 x 16), each with Abacus, FIRE and NoPE embeddings." The right panel (size-40
data, FIRE and NoPE only) is `--set task.train_max_len=40 --positions fire,nope`.

Tiny: depth 2 (ST 2 x 1, ST w/ II 2 x 1, LT 1 x 2) on size-5 addition, one seed.
"""

from abacus_ray.config.model import EMBEDDINGS, PAPER_ARCHS, TINY_ARCHS
from abacus_ray.evaluation.claims import Cells, Claim, embedding
from abacus_ray.sweep import CPU_SCALE, Flag, Scale, Sweep

SWEEP = Sweep(
    name="fig3_embeddings",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "task.train_max_len": 20},
    variants=PAPER_ARCHS,
    axes={"model.positions": EMBEDDINGS},
    seeds=3,
    grids=("paper-addition",),
    tiny=Scale(
        overrides={
            **CPU_SCALE,
            "task.train_max_len": 5,
        },
        variants=TINY_ARCHS,
        seeds=1,
        grids=("tiny-addition",),
    ),
    flags=(Flag("--positions", "model.positions", "position embeddings to compare"),),
)

CLAIM = Claim(
    "Fig. 3",
    "Abacus embeddings extrapolate addition further than FIRE and NoPE",
    Cells("OOD", view="ood"),
    paper="OOD, ST / ST w/ II: Abacus 92.9 / 97.9 %, FIRE 3.6 / 2.9 %, NoPE 4.3 / 3.2 %",
    pairs=((embedding("abacus"), embedding("fire")), (embedding("abacus"), embedding("nope"))),
)
