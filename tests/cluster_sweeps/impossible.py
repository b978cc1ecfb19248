"""One trial that fits a test cluster's CPU nodes and one that no node can hold (64 `cpu_pool` per worker)."""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.sweep import Sweep

SWEEP = Sweep(
    name="impossible",
    caption=__doc__.splitlines()[0],
    base={"cluster.trainer": "function", "train.max_steps": 5, "train.budget_hours": 1000.0},
    variants=[{"cluster.resources": "cpu_pool:1"}, {"cluster.resources": "cpu_pool:64"}],
    seeds=1,
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
