"""One 2-worker DDP trial packed on one node, and the same trial with a worker on each of two nodes."""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.sweep import Sweep

SWEEP = Sweep(
    name="ddp_nodes",
    caption=__doc__.splitlines()[0],
    base={"cluster.workers": 2, "train.max_steps": 40, "train.budget_hours": 1000.0},
    variants=[{"cluster.placement": "STRICT_PACK"}, {"cluster.placement": "STRICT_SPREAD"}],
    seeds=1,
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
