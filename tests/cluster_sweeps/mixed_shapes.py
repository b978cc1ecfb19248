"""Seven short trials of three resource shapes on the lab cluster of tests/test_multinode.py, then a
small grid evaluation of every model: two waves of each shape on its nodes."""

import sys

from trial_shapes import one_model_each  # beside this script

from abacus_ray.cli.sweep import main
from abacus_ray.sweep import Sweep

# The lab cluster's slots: `accel` 1 (the GPU node), `cpu_pool` 3 (the CPU node). Two waves each: two
# `accel:1` trials, and one `cpu_pool:2` trial plus four `cpu_pool:1` (six units on three slots; the
# two-slot trial first, so that it starts with the first wave rather than wait for two slots at once;
# a third of the steps, as its two threads on shared cores make each step about three times slower).
# `function` trials: the loop runs in the Tune trial, no Train worker group to start.
KINDS = [({"cluster.resources": "accel:1"}, 2), ({"cluster.resources": "cpu_pool:2", "cluster.cpus_per_worker": 2, "train.max_steps": 40}, 1),
         ({"cluster.resources": "cpu_pool:1"}, 4)]

SWEEP = Sweep(
    name="mixed_shapes",
    caption=__doc__.splitlines()[0],
    base={"cluster.trainer": "function", "train.max_steps": 120, "train.budget_hours": 1000.0, "eval.per_cell": 2},
    variants=one_model_each(KINDS),
    seeds=1,
    grids=("cells:1-4x1-4",),
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
