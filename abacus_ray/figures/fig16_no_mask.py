"""Fig. 16 — no loss masking before the equals sign.

"LT, ST and ST w/ II with Abacus, FIRE and NoPE trained on size-20 addition with the loss computed
on the whole sequence, prompt included (mask_before_equals = False)."

Tiny: the depth-2 trio on size-5 addition, one seed.
"""

from abacus_ray.config.model import EMBEDDINGS, PAPER_ARCHS, TINY_ARCHS
from abacus_ray.sweep import Scale, Sweep

SWEEP = Sweep(
    name="fig16_no_mask",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "task.train_max_len": 20, "train.mask_before_equals": False},
    variants=PAPER_ARCHS,
    axes={"model.positions": EMBEDDINGS},
    seeds=3,
    grids=("paper-addition",),
    tiny=Scale(overrides={"task.train_max_len": 5}, variants=TINY_ARCHS, seeds=1, grids=("tiny-addition",)),
)
