"""24 short trials of five resource shapes (custom resources standing for GPU kinds) on the many-node
cluster of tests/test_many_nodes.py, then a small grid evaluation of every model."""

import sys

from trial_shapes import one_model_each  # beside this script

from abacus_ray.cli.sweep import main
from abacus_ray.sweep import Sweep

# Two waves of each kind on the test's cluster: h100 4 slots, a4000 2, l4 1, cpu_pool 6 (CPU trials of
# 1 and of 2 units; the two-unit trials first, so that they start with the first wave on two whole
# nodes rather than wait, behind the one-unit trials, for two slots of one node to free at once; half
# the steps, as their two threads on the shared cores make each step about twice as slow: one wave).
# `function` trials: the loop runs in the Tune trial, no Train worker group to start.
KINDS = [({"cluster.resources": "h100:1"}, 8), ({"cluster.resources": "a4000:1"}, 4),
         ({"cluster.resources": "l4:1"}, 2), ({"cluster.resources": "cpu_pool:2", "cluster.cpus_per_worker": 2, "train.max_steps": 20}, 2),
         ({"cluster.resources": "cpu_pool:1"}, 8)]

SWEEP = Sweep(
    name="many_nodes",
    caption=__doc__.splitlines()[0],
    base={"cluster.trainer": "function", "train.max_steps": 40, "train.budget_hours": 1000.0, "eval.per_cell": 2},
    variants=one_model_each(KINDS),
    seeds=1,
    grids=("cells:1-4x1-4",),
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
