"""24 short trials of five resource shapes (custom resources standing for GPU kinds) on the many-node
cluster of tests/test_many_nodes.py, then a small grid evaluation of every model."""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.sweep import Sweep

# Two waves of each kind on the test's cluster: h100 4 slots, a4000 2, l4 1, cpu_pool 6 (CPU trials of
# 1 and of 2 units). `function` trials: the loop runs in the Tune trial, no Train worker group to start.
KINDS = [({"cluster.resources": "h100:1"}, 8), ({"cluster.resources": "a4000:1"}, 4),
         ({"cluster.resources": "l4:1"}, 2), ({"cluster.resources": "cpu_pool:1"}, 8),
         ({"cluster.resources": "cpu_pool:2", "cluster.cpus_per_worker": 2}, 2)]
# a learning rate of its own per trial: 24 different models (equal weights would share one model id)
SHAPES: list[dict] = []
for shape, n in KINDS:
    for _ in range(n):
        SHAPES.append({**shape, "train.lr": round(1e-3 - 2e-5 * len(SHAPES), 6)})

SWEEP = Sweep(
    name="many_nodes",
    caption=__doc__.splitlines()[0],
    base={"cluster.trainer": "function", "train.max_steps": 40, "train.budget_hours": 1000.0, "eval.per_cell": 2},
    variants=SHAPES,
    seeds=1,
    grids=("cells:1-4x1-4",),
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
