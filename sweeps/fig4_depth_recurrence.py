"""Fig. 4 — depth versus recurrence at equal effective depth 16.

The figure's sweep ships with the package (`abacus_ray/figures/fig4_depth_recurrence.py`); this
script runs it: `python sweeps/fig4_depth_recurrence.py [flags]` (also under `ray job submit`) is
`abacus-ray sweep fig4_depth_recurrence [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig4_depth_recurrence import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
