"""Fig. 20 — random padding of the training data.

The figure's sweep ships with the package (`abacus_ray/figures/fig20_random_padding.py`); this
script runs it: `python sweeps/fig20_random_padding.py [flags]` (also under `ray job submit`) is
`abacus-ray sweep fig20_random_padding [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig20_random_padding import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
