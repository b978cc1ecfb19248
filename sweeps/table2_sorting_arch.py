"""Table 2 — sorting across architectures.

The figure's sweep ships with the package (`abacus_ray/figures/table2_sorting_arch.py`); this script
runs it: `python sweeps/table2_sorting_arch.py [flags]` (also under `ray job submit`) is `abacus-ray
sweep table2_sorting_arch [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.table2_sorting_arch import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
