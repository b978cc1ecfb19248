"""Tiny settings that make the unlearned arms learn: learning rate and steps for the looped and +/- models.

The arms that stay under the 90 % in-distribution floor at the figures' CPU scale (1,500 steps of
64 at lr 1e-3, docs/results.md "Three seeds"): Fig. 4's LT 2 x 2, Fig. 18's (and Fig. 20's) LT
1 x 2, Fig. 19's LT 1 x 4 with injection before the block only, and Fig. 5's 2-layer model on
addition and subtraction. Each is trained again at a higher learning rate (the lever that costs no
compute: the `reproduce` budget is spent) and at twice the steps at the figures' rate (the lever
that costs compute). The 1,500-step, lr 1e-3 point is the three-seed run itself.

Run it:  abacus-ray sweep docs/results/learn_search.py --storage DIR
Read it: abacus-ray summary DIR/learn_search   (in-distribution exact match per trial)
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.config.model import looped
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

# The unlearned arms, each with its figure's task at the tiny scale (size-5 operands, Abacus).
ARMS = [
    {**looped(2, 2), "task.name": "add"},  # Fig. 4
    {**looped(1, 2), "task.name": "add"},  # Fig. 18 (Fig. 20 adds random pads)
    {**looped(1, 4, "first"), "task.name": "add"},  # Fig. 19
    {**looped(2, 1), "task.name": "addsub"},  # Fig. 5
]
# Higher rates at the figures' 1,500 steps, and the figures' rate at twice the steps.
SETTINGS = [
    {"train.lr": 2e-3, "train.max_steps": 1500},
    {"train.lr": 3e-3, "train.max_steps": 1500},
    {"train.lr": 1e-3, "train.max_steps": 3000},
]

SWEEP = Sweep(
    name="learn_search",
    caption=__doc__.splitlines()[0],
    base={"task.train_max_len": 5, "model.positions": "abacus"},
    variants=[{**arm, **setting} for arm in ARMS for setting in SETTINGS],
    seeds=1,
    grids=("tiny-addition",),
    tiny=Scale(overrides={**CPU_SCALE}, seeds=1),
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
