"""Fig. 15 — what a looped model predicts after each recurrence.

The figure's sweep ships with the package (`abacus_ray/figures/fig15_recurrence_outputs.py`); this
script runs it: `python sweeps/fig15_recurrence_outputs.py [flags]` (also under `ray job submit`) is
`abacus-ray sweep fig15_recurrence_outputs [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig15_recurrence_outputs import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
