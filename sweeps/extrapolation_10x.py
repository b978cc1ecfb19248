"""Beyond the paper — 10x length generalisation for addition, found by a search.

The figure's sweep ships with the package (`abacus_ray/figures/extrapolation_10x.py`); this script
runs it: `python sweeps/extrapolation_10x.py [flags]` (also under `ray job submit`) is `abacus-ray
sweep extrapolation_10x [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.extrapolation_10x import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
