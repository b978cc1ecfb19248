"""Two CPU trials long enough to lose a node under them, then a grid long enough to lose one again."""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.sweep import Sweep

SWEEP = Sweep(
    name="nodeloss",
    caption=__doc__.splitlines()[0],
    # A steps budget makes training deterministic; a checkpoint every 3 s. `cpu_pool` keeps the
    # trials on the CPU nodes (the ones the test kills), and off the head and the GPU node.
    base={"train.max_steps": 60, "train.budget_hours": 1000.0, "train.report_every_s": 1.0,
          "train.checkpoint_every_min": 0.05, "cluster.resources": "cpu_pool:1", "eval.per_cell": 10},
    variants=[{"train.lr": 0.001}, {"train.lr": 0.0008}],
    seeds=1,
    grids=("cells:1-20x1-20",),
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
