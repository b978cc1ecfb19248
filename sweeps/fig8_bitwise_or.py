"""Fig. 8 — bitwise OR.

"LT, ST and ST w/ II with Abacus, FIRE and NoPE trained on bitwise OR of one-hot vectors up to
length 20 (1 hour budget), evaluated to length 40." Training data is the exhaustive set (2,870
problems for n = 20), drawn stratified; the official shell's `--max 100` subsample is not copied.

Tiny: depth-2 architectures, vectors up to length 6, 1..12 square, one seed.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.config.model import EMBEDDINGS, PAPER_ARCHS, TINY_ARCHS
from abacus_ray.sweep import Scale, Sweep

SWEEP = Sweep(
    name="fig8_bitwise_or",
    caption=__doc__.splitlines()[0],
    base={"task.name": "or", "task.train_max_len": 20, "train.budget_hours": 1.0},
    variants=PAPER_ARCHS,
    axes={"model.positions": EMBEDDINGS},
    seeds=3,
    grids=("paper-or",),
    tiny=Scale(overrides={"task.train_max_len": 6}, variants=TINY_ARCHS, seeds=1, grids=("cells:1-12x1-12",)),
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
