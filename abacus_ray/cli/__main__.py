import sys

from abacus_ray.cli import main

sys.exit(main())
