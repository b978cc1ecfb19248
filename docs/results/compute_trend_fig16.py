"""Fig. 16's reversed comparison against compute: the 2-layer ST with and without loss masking at 4x.

At the figures' CPU scale (1,500 steps of 64, seed 0) the standard transformer (2 x 1, Abacus)
trained without loss masking extrapolated further than its masked run in Fig. 3's sweep, both
having learned: the reverse of the paper's Fig. 16. This sweep trains the two again with
everything but the step count as in the figures' tiny scale (size-5 addition, d = 128, lr 1e-3,
seed 0), at 6,000 steps, so that the effect (masked minus unmasked, OOD) can be read against
compute beside the 1,500-step point. The claim is Fig. 16's across-sweeps claim, held within the
step count.

Run it:  abacus-ray sweep docs/results/compute_trend_fig16.py --storage DIR
Read it: abacus-ray summary DIR/compute_trend_fig16
"""

import sys
from dataclasses import replace

from abacus_ray.cli.sweep import main
from abacus_ray.config.model import standard
from abacus_ray.figures.fig16_no_mask import ACROSS
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="compute_trend_fig16",
    caption=__doc__.splitlines()[0],
    base={"task.name": "add", "task.train_max_len": 5, "model.positions": "abacus",
          **standard(2), "train.max_steps": 6000},
    axes={"train.mask_before_equals": [True, False]},
    seeds=1,
    grids=("tiny-addition",),
    tiny=Scale(overrides={**CPU_SCALE, "train.max_steps": 6000}, seeds=1),
)

CLAIM = replace(ACROSS.claim, within=("train.max_steps",))

if __name__ == "__main__":
    sys.exit(main(SWEEP))
