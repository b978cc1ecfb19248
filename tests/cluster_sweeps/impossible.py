"""One trial that fits the many-node cluster and one that no node can hold (two `l4` per worker)."""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.sweep import Sweep

SWEEP = Sweep(
    name="impossible",
    caption=__doc__.splitlines()[0],
    base={"cluster.trainer": "function", "train.max_steps": 5, "train.budget_hours": 1000.0},
    variants=[{"cluster.resources": "l4:1"}, {"cluster.resources": "l4:2"}],
    seeds=1,
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
