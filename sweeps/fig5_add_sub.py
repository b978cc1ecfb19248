"""Fig. 5 — addition and subtraction in one model.

The figure's sweep ships with the package (`abacus_ray/figures/fig5_add_sub.py`); this script runs
it: `python sweeps/fig5_add_sub.py [flags]` (also under `ray job submit`) is `abacus-ray sweep
fig5_add_sub [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig5_add_sub import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
