"""Fig. 7 — Abacus combined with relative embeddings.

The figure's sweep ships with the package (`abacus_ray/figures/fig7_relative.py`); this script runs
it: `python sweeps/fig7_relative.py [flags]` (also under `ray job submit`) is `abacus-ray sweep
fig7_relative [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig7_relative import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
