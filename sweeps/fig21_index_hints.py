"""Fig. 21 — index hints.

The figure's sweep ships with the package (`abacus_ray/figures/fig21_index_hints.py`); this script
runs it: `python sweeps/fig21_index_hints.py [flags]` (also under `ray job submit`) is `abacus-ray
sweep fig21_index_hints [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig21_index_hints import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
