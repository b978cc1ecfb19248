"""Table 1 — sorting with FIRE, Abacus and Abacus+FIRE.

The figure's sweep ships with the package (`abacus_ray/figures/table1_sorting.py`); this script runs
it: `python sweeps/table1_sorting.py [flags]` (also under `ray job submit`) is `abacus-ray sweep
table1_sorting [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.table1_sorting import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
