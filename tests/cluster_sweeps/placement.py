"""A GPU-slot trial and a CPU trial, each placed by its config's resources (tests/test_multinode.py)."""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.sweep import Sweep

SWEEP = Sweep(
    name="placement",
    caption=__doc__.splitlines()[0],
    base={"train.max_steps": 30, "train.budget_hours": 1000.0, "eval.per_cell": 2},
    # custom resources pin each kind: `accel` is only on the GPU node, `cpu_pool` only on the CPU node
    variants=[{"cluster.use_gpu": True, "cluster.resources": "accel:1"},
              {"cluster.use_gpu": False, "cluster.resources": "cpu_pool:1", "train.max_steps": 31}],  # another model
    seeds=1,
    grids=("cells:1-6x1-6",),
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
