"""Fig. 11 — larger Abacus offsets extrapolate further.

"Models trained on size-30 and size-40 addition with k = 125, 150 and 175 (8 x 2 looped, Abacus),
accuracy on the i = j diagonal up to 200 (size 30) and 220 (size 40) digits."

Tiny: size-5 and size-8 data with k = 5n/4 .. 7n/4 scaled (8, 10, 12 / 13, 16, 19), diagonal to 40.
"""

from abacus_ray.config.model import looped
from abacus_ray.evaluation.claims import MAX, MIN, Arm, Cells, Claim
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="fig11_large_k",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "model.positions": "abacus", **looped(8, 2)},
    variants=[{"task.train_max_len": 30, "model.max_k": k} for k in (125, 150, 175)]
    + [{"task.train_max_len": 40, "model.max_k": k} for k in (125, 150, 175)],
    seeds=3,
    grids=("diagonal:1-220",),
    tiny=Scale(overrides={**CPU_SCALE, "model.layers": 2,
                          "model.recurrences": 1},
               variants=[{"task.train_max_len": 5, "model.max_k": k} for k in (8, 10, 12)]
               + [{"task.train_max_len": 8, "model.max_k": k} for k in (13, 16, 19)],
               seeds=1, grids=("diagonal:1-40",)),
)

CLAIM = Claim(
    "Fig. 11",
    "from size-30 and size-40 data alike, a larger offset k solves lengths past a smaller k's "
    "trained positions",
    Cells("i = j", past_positions=True),
    paper="k = 125, 150, 175; up to 6.8x the training length",
    within=("task.train_max_len",),
    pairs=((Arm("largest k", {"model.max_k": MAX}), Arm("smallest k", {"model.max_k": MIN})),),
)
