"""Fig. 7 — Abacus combined with relative embeddings.

"ST w/ II (16 x 1) on size-20 addition with Abacus+FIRE, FIRE, Abacus+RoPE and RoPE: Abacus
complements relative embeddings." Mean of 3 runs, 100 x 100 grid and 100+. As in the official
shells, the two Abacus combinations train with micro-batch 256, FIRE and RoPE alone with 512
(docs/official-code.md §6.10).

Tiny: ST w/ II 2 x 1 on size-5 addition, one seed.
"""

from abacus_ray.config.model import ST_MICRO_BATCH, standard_ii
from abacus_ray.evaluation.claims import Cells, Claim, embedding
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="fig7_relative",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "task.train_max_len": 20, **standard_ii(16)},
    variants=[
        {"model.positions": "abacus+fire", "train.micro_batch": ST_MICRO_BATCH},
        {"model.positions": "fire"},
        {"model.positions": "abacus+rope", "train.micro_batch": ST_MICRO_BATCH},
        {"model.positions": "rope"},
    ],
    seeds=3,
    grids=("paper-addition",),
    tiny=Scale(
        overrides={
            **CPU_SCALE,
            "task.train_max_len": 5,
            **standard_ii(2),
        },
        seeds=1,
        grids=("tiny-addition",),
        variants=[{"model.positions": p} for p in ("abacus+fire", "fire", "abacus+rope", "rope")],
    ),
)

CLAIM = Claim(
    "Fig. 7",
    "adding Abacus to FIRE or to RoPE improves OOD addition",
    Cells("OOD", view="ood"),
    paper=(
        "read from the ST w/ II 16 x 1 heatmaps: Abacus+FIRE extrapolates well beyond FIRE, "
        "Abacus+RoPE beyond RoPE"
    ),
    pairs=(
        (embedding("abacus+fire"), embedding("fire")),
        (embedding("abacus+rope"), embedding("rope")),
    ),
)
