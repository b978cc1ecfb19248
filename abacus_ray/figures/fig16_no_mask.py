"""Fig. 16 — no loss masking before the equals sign.

"LT, ST and ST w/ II with Abacus, FIRE and NoPE trained on size-20 addition with the loss computed
on the whole sequence, prompt included (mask_before_equals = False)." The paper also reads each
Abacus model against its masked run, which is Fig. 3's sweep (the same models, data and seeds with
the mask on): `ACROSS` compares the two sweeps wherever both have run.

Tiny: the depth-2 trio on size-5 addition, one seed.
"""

from abacus_ray.config.model import EMBEDDINGS, PAPER_ARCHS, TINY_ARCHS
from abacus_ray.evaluation.claims import Across, Arm, Cells, Claim, embedding
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="fig16_no_mask",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "task.train_max_len": 20, "train.mask_before_equals": False},
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
)

CLAIM = Claim(
    "Fig. 16",
    "without loss masking Abacus still extrapolates further than FIRE and NoPE",
    Cells("OOD", view="ood"),
    paper=(
        "OOD: Abacus 9.1 / 53.0 / 84.9 % for LT / ST / ST w/ II, each below its masked run; FIRE "
        "and NoPE <= 3.5 %"
    ),
    pairs=((embedding("abacus"), embedding("fire")), (embedding("abacus"), embedding("nope"))),
)

ACROSS = Across(
    Claim(
        "Fig. 16",
        "without loss masking each Abacus architecture extrapolates less than its masked run "
        "(Fig. 3's sweep)",
        Cells("OOD", view="ood"),
        paper="OOD: Abacus 9.1 / 53.0 / 84.9 % for LT / ST / ST w/ II, each below its masked run",
        within=("model.recurrences", "model.injection"),
        pairs=(
            (
                Arm("masked (Fig. 3)",
                    {"model.positions": "abacus", "train.mask_before_equals": True}),
                Arm("unmasked", {"model.positions": "abacus", "train.mask_before_equals": False}),
            ),
        ),
    ),
    sweeps=("fig3_embeddings",),
)
