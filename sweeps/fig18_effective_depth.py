"""Fig. 18 — other effective depths.

The figure's sweep ships with the package (`abacus_ray/figures/fig18_effective_depth.py`); this
script runs it: `python sweeps/fig18_effective_depth.py [flags]` (also under `ray job submit`) is
`abacus-ray sweep fig18_effective_depth [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig18_effective_depth import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
