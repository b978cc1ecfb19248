"""Fig. 4 — depth versus recurrence at equal effective depth 16.

"Exact match accuracy of standard transformers (16 x 1, with input injection) and looped
transformers (8 x 2, 4 x 4, 2 x 8, 1 x 16) with Abacus embeddings trained on size-20 addition; mean
of 3 runs, OOD (100 x 100) and 100+ (101-160 diagonal)." All inject the embedding before every layer
(docs/official-code.md §4.1). `--positions fire,nope` gives Fig. 17 (the same with FIRE
and NoPE) from this file.

Tiny: effective depth 4 (4 x 1, 2 x 2, 1 x 4) on size-5 addition, one seed.
"""

from abacus_ray.config.model import looped, standard_ii
from abacus_ray.evaluation.claims import Arm, Cells, Claim
from abacus_ray.sweep import CPU_SCALE, Flag, Scale, Sweep

SWEEP = Sweep(
    name="fig4_depth_recurrence",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "task.train_max_len": 20, "model.positions": "abacus"},
    variants=[standard_ii(16), looped(8, 2), looped(4, 4), looped(2, 8), looped(1, 16)],
    seeds=3,
    grids=("paper-addition",),
    tiny=Scale(
        overrides={**CPU_SCALE, "task.train_max_len": 5},
        variants=[standard_ii(4), looped(2, 2), looped(1, 4)],
        seeds=1,
        grids=("tiny-addition",),
    ),
    flags=(
        Flag(
            "--positions", "model.positions", "position embedding(s); fire,nope reproduces Fig. 17"
        ),
    ),
)

CLAIM = Claim(
    "Fig. 4",
    "at equal effective depth, the looped model with 2 recurrences beats the standard transformer "
    "with input injection (tiny: 2 x 2 against 4 x 1)",
    Cells("OOD", view="ood"),
    paper="Abacus OOD: LT 8 x 2 99.1 %, ST w/ II 16 x 1 97.9 %",
    within=("model.positions",),
    pairs=(
        (
            Arm("LT, 2 recurrences", {"model.recurrences": 2}),
            Arm("ST w/ II", {"model.recurrences": 1}),
        ),
    ),
)
