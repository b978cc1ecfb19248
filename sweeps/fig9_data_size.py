"""Fig. 9 — the effect of training data size.

The figure's sweep ships with the package (`abacus_ray/figures/fig9_data_size.py`); this script runs
it: `python sweeps/fig9_data_size.py [flags]` (also under `ray job submit`) is `abacus-ray sweep
fig9_data_size [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig9_data_size import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
