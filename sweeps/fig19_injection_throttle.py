"""Fig. 19 — ablations of input injection and gradient throttling.

The figure's sweep ships with the package (`abacus_ray/figures/fig19_injection_throttle.py`); this
script runs it: `python sweeps/fig19_injection_throttle.py [flags]` (also under `ray job submit`) is
`abacus-ray sweep fig19_injection_throttle [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig19_injection_throttle import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
