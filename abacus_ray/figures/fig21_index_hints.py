"""Fig. 21 — index hints.

"LT, ST and ST w/ II with randomised FIRE trained on size-20 addition where every digit carries a
circular index hint" (Zhou et al. 2024). Randomised FIRE draws positions from 0..127 (the official
README example; the paper's value is unknown, docs/official-code.md §11.3). `--hints noncyclic` gives the variant the
official generator lacks.

Tiny: the depth-2 trio on size-5 addition, one seed.
"""

from abacus_ray.config.model import PAPER_ARCHS, TINY_ARCHS
from abacus_ray.sweep import Flag, Scale, Sweep

SWEEP = Sweep(
    name="fig21_index_hints",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "task.train_max_len": 20, "task.index_hints": "cyclic", "model.positions": "fire",
          "model.fire_max_length": 128},
    variants=PAPER_ARCHS,
    seeds=3,
    grids=("paper-addition",),
    tiny=Scale(overrides={"task.train_max_len": 5, "model.fire_max_length": 64}, variants=TINY_ARCHS, seeds=1,
               grids=("tiny-addition",)),
    flags=(Flag("--hints", "task.index_hints", "index hint style: cyclic or noncyclic"),),
)
