"""Fig. 6 — multiplication with Abacus, Abacus+FIRE and FIRE.

The figure's sweep ships with the package (`abacus_ray/figures/fig6_multiplication.py`); this script
runs it: `python sweeps/fig6_multiplication.py [flags]` (also under `ray job submit`) is `abacus-ray
sweep fig6_multiplication [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig6_multiplication import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
