"""Fig. 3 — Abacus, FIRE and NoPE embeddings across architectures.

The figure's sweep ships with the package (`abacus_ray/figures/fig3_embeddings.py`); this script
runs it: `python sweeps/fig3_embeddings.py [flags]` (also under `ray job submit`) is `abacus-ray
sweep fig3_embeddings [flags]`.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.figures.fig3_embeddings import SWEEP

if __name__ == "__main__":
    sys.exit(main(SWEEP))
