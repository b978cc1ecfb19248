"""`abacus-ray dashboard RESULTS [--out DIR] [--serve]`: interactive accuracy dashboards from Parquet.

RESULTS is a results directory, a sweep root (holding `results/`) or a storage root holding several
sweeps. The site is static HTML that works offline; `--serve` serves it on 127.0.0.1 and rebuilds it
when new Parquet parts arrive, so an evaluation can be watched while it streams in.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def default_out(results: Path) -> Path:
    """`dashboard/` beside a results directory, or inside a sweep or storage root."""
    return results.parent / "dashboard" if results.name == "results" else results / "dashboard"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("dashboard", help="build interactive accuracy dashboards from Parquet results",
                              description=__doc__.splitlines()[0])
    p.add_argument("results", metavar="RESULTS", help="results directory, sweep root or storage root")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where to write the site (default: dashboard/ beside the results)")
    p.add_argument("--serve", action="store_true", help="serve the site on 127.0.0.1 and rebuild on new results")
    p.add_argument("--port", type=int, default=8765, help="port for --serve (default 8765; 0 picks a free one)")
    p.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    from abacus_ray.cli import check_output_dir
    from dashboards.build import build_site

    results = Path(args.results)
    out = check_output_dir(args.out if args.out else default_out(results), "--out")
    if args.serve:
        from dashboards.serve import serve

        try:
            serve(results, out, port=args.port)
        except KeyboardInterrupt:
            pass
        return 0
    print(build_site(results, out))
    return 0
