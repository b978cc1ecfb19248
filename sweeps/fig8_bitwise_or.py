"""Fig. 8 — bitwise OR.

The figure's sweep ships with the package (`abacus_ray/figures/fig8_bitwise_or.py`); this script
runs it: `python sweeps/fig8_bitwise_or.py [flags]` (also under `ray job submit`) is `abacus-ray
sweep fig8_bitwise_or [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig8_bitwise_or import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
