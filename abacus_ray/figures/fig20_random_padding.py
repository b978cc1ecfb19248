"""Fig. 20 — random padding of the training data.

"LT, ST and ST w/ II with Abacus, FIRE and NoPE trained on size-20 addition with pad tokens inserted
at random positions." The paper does not give the probability (docs/official-code.md §11.2);
`--pad-p` sets it (default 0.1; each extra pad 10x less likely). Evaluation prompts carry no pads.

Tiny: the depth-2 trio on size-5 addition, one seed.
"""

from abacus_ray.config.model import EMBEDDINGS, PAPER_ARCHS, TINY_ARCHS
from abacus_ray.evaluation.claims import MAX, Arm, Cells, Claim
from abacus_ray.sweep import CPU_SCALE, Flag, Scale, Sweep

SWEEP = Sweep(
    name="fig20_random_padding",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "task.train_max_len": 20, "task.pad_p": 0.1},
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
    flags=(Flag("--pad-p", "task.pad_p", "probability of a pad before each character"),),
)

LT = Arm("LT", {"model.positions": "abacus", "model.recurrences": MAX})
CLAIM = Claim(
    "Fig. 20",
    "with random padding the looped transformer with Abacus extrapolates where ST and ST w/ II do "
    "not",
    Cells("OOD", view="ood"),
    paper="Abacus OOD: LT 72.8 %, ST 1.5 %, ST w/ II 1.4 %",
    pairs=(
        (
            LT,
            Arm(
                "ST",
                {"model.positions": "abacus", "model.recurrences": 1, "model.injection": "first"},
            ),
        ),
        (
            LT,
            Arm(
                "ST w/ II",
                {"model.positions": "abacus", "model.recurrences": 1, "model.injection": "every"},
            ),
        ),
    ),
)
