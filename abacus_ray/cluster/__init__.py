"""The Ray layer: the only package that imports Ray.

Importing it first sets the environment that keeps a local Ray on loopback (see `runtime.py`), so
that every Ray process this package starts listens on 127.0.0.1 only.
"""

from abacus_ray.cluster.runtime import configure_environment

configure_environment()
