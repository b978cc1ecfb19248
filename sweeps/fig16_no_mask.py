"""Fig. 16 — no loss masking before the equals sign.

The figure's sweep ships with the package (`abacus_ray/figures/fig16_no_mask.py`); this script runs
it: `python sweeps/fig16_no_mask.py [flags]` (also under `ray job submit`) is `abacus-ray sweep
fig16_no_mask [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig16_no_mask import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
