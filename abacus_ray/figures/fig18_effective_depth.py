"""Fig. 18 — other effective depths.

"Left: effective depth 8 — LT 1 x 8, ST 8 x 1 and ST w/ II 8 x 1 with Abacus, FIRE and NoPE.
Right: larger effective depths, labelled 1x32, 4x8 and 8x8" (read as layers x recurrences; the
labels' orientation is an open question, docs/official-code.md §11.9). Size-20 addition.

Tiny: the depth-2 trio on size-5 addition, Abacus only, one seed.
"""

from abacus_ray.config.model import EMBEDDINGS, TINY_ARCHS, looped, standard, standard_ii
from abacus_ray.evaluation.claims import MIN, Arm, Cells, Claim
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="fig18_effective_depth",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "task.train_max_len": 20},
    variants=[looped(1, 8), standard(8), standard_ii(8), looped(1, 32), looped(4, 8), looped(8, 8)],
    axes={"model.positions": EMBEDDINGS},
    seeds=3,
    grids=("paper-addition",),
    tiny=Scale(
        overrides={**CPU_SCALE, "task.train_max_len": 5},
        variants=TINY_ARCHS,
        axes={"model.positions": ["abacus"]},
        seeds=1,
        grids=("tiny-addition",),
    ),
)

CLAIM = Claim(
    "Fig. 18",
    "at effective depth 8 the standard transformer with input injection beats the one-layer looped"
    " model (tiny: 2 x 1 against 1 x 2)",
    Cells("OOD", view="ood"),
    paper="Abacus OOD: ST w/ II 8 x 1 97.5 %, LT 1 x 8 49.2 %",
    pairs=(
        (
            Arm(
                "ST w/ II",
                {"model.positions": "abacus", "model.injection": "every", "model.recurrences": 1},
            ),
            Arm(
                "LT 1 x R",
                {"model.positions": "abacus", "model.layers": 1, "model.recurrences": MIN},
            ),
        ),
    ),
)
