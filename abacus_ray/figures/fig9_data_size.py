"""Fig. 9 — the effect of training data size.

"Mean exact match accuracy of LT (1 x 16), ST and ST w/ II with Abacus, FIRE and NoPE embeddings
trained on addition of size 10, 20, 30 and 40 (Figs. 12-13 show their heatmaps)."

Tiny: size 3, 5 and 8, depth-2 architectures, Abacus only, one seed.
"""

from abacus_ray.config.model import EMBEDDINGS, PAPER_ARCHS, TINY_ARCHS
from abacus_ray.evaluation.claims import MAX, MIN, Arm, Cells, Claim
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="fig9_data_size",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add"},
    variants=PAPER_ARCHS,
    axes={"task.train_max_len": [10, 20, 30, 40], "model.positions": EMBEDDINGS},
    seeds=3,
    grids=("paper-addition",),
    tiny=Scale(
        overrides={**CPU_SCALE},
        variants=TINY_ARCHS,
        axes={"task.train_max_len": [3, 5, 8], "model.positions": ["abacus"]},
        seeds=1,
        grids=("tiny-addition",),
    ),
)

CLAIM = Claim(
    "Fig. 9",
    "models trained on longer operands reach higher OOD accuracy",
    Cells("OOD", view="ood"),
    paper="LT Abacus OOD: 35.8 / 79.8 / 96.8 / 99.1 % for size 10 / 20 / 30 / 40",
    within=("model.positions",),
    pairs=(
        (
            Arm("longest training", {"task.train_max_len": MAX}),
            Arm("shortest training", {"task.train_max_len": MIN}),
        ),
    ),
)
