"""Fig. 10 — varying the Abacus offset k.

The figure's sweep ships with the package (`abacus_ray/figures/fig10_k.py`); this script runs it:
`python sweeps/fig10_k.py [flags]` (also under `ray job submit`) is `abacus-ray sweep fig10_k
[flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig10_k import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
