"""Fig. 4's reversed comparison against compute: LT 2 x 2 and ST w/ II 4 x 1 at 2x and 4x the steps.

At the figures' CPU scale (1,500 steps of 64, seed 0) both arms learned and the standard model
extrapolated further, the reverse of the paper's Fig. 4 (docs/results.md). This sweep trains the
two compared arms again with everything but the step count as in `fig4_depth_recurrence`'s tiny
scale (size-5 Abacus addition, d = 128, lr 1e-3, seed 0), at 3,000 and 6,000 steps, so that the
effect (LT minus ST w/ II, OOD) can be read against compute beside the 1,500-step point. The
claim is Fig. 4's, held within each step count.

Run it:  abacus-ray sweep docs/results/compute_trend.py --storage DIR
Read it: abacus-ray summary DIR/compute_trend
"""

import sys
from dataclasses import replace

from abacus_ray.cli.sweep import main
from abacus_ray.config.model import looped, standard_ii
from abacus_ray.figures.fig4_depth_recurrence import CLAIM as FIG4
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

STEPS = (3000, 6000)  # 2x and 4x the figures' 1,500

SWEEP = Sweep(
    name="compute_trend",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "task.train_max_len": 5, "model.positions": "abacus"},
    variants=[
        {**arm, "train.max_steps": steps}
        for steps in STEPS
        for arm in (standard_ii(4), looped(2, 2))
    ],
    seeds=1,
    grids=("tiny-addition",),
    tiny=Scale(overrides={**CPU_SCALE}, seeds=1),  # its 1,500 steps give way to each variant's
)

CLAIM = replace(FIG4, within=("model.positions", "train.max_steps"))

if __name__ == "__main__":
    sys.exit(main(SWEEP))
