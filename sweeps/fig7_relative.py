"""Fig. 7 — Abacus combined with relative embeddings.

"ST w/ II (16 x 1) on size-20 addition with Abacus+FIRE, FIRE, Abacus+RoPE and RoPE: Abacus
complements relative embeddings." Mean of 3 runs, 100 x 100 grid and 100+.

Tiny: ST w/ II 2 x 1 on size-5 addition, one seed.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.config.model import standard_ii
from abacus_ray.sweep import Scale, Sweep

SWEEP = Sweep(
    name="fig7_relative",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "task.train_max_len": 20, **standard_ii(16)},
    axes={"model.positions": ["abacus+fire", "fire", "abacus+rope", "rope"]},
    seeds=3,
    grids=("paper-addition",),
    tiny=Scale(overrides={"task.train_max_len": 5, **standard_ii(2)}, seeds=1, grids=("tiny-addition",)),
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
