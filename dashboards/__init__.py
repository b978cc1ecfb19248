"""Interactive accuracy dashboards from abacus-ray's Parquet results.

`build_site(results, out_dir)` writes a static, offline site: an index of sweeps and models, one
page per sweep (heatmaps in the paper's orientation, diagonal lines, region bars with per-seed
points, sorting tables, per-recurrence lines) and the paper's reported numbers beside ours.
`serve.serve(results, out_dir)` serves it on 127.0.0.1 and rebuilds when new Parquet parts arrive.
"""

from dashboards.build import build_site

__all__ = ["build_site"]
