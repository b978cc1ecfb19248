"""Fig. 11 — larger Abacus offsets extrapolate further.

The figure's sweep ships with the package (`abacus_ray/figures/fig11_large_k.py`); this script runs
it: `python sweeps/fig11_large_k.py [flags]` (also under `ray job submit`) is `abacus-ray sweep
fig11_large_k [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig11_large_k import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
