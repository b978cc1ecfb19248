"""`abacus-ray eval-all RESULTS [--grid G]`: every trained model under
RESULTS, scored through Ray Data.

    abacus-ray eval-all RESULTS [--grid paper-100plus] [--out DIR] [--include STATUS,...]

RESULTS is a sweep root, a storage root holding several sweeps (a sweep's `--storage`, a bucket
prefix), a sweep's results directory, or a directory of `abacus-ray train --out` runs, as for
`summary` and `dashboard` (`evaluation.locate`); nothing above RESULTS is searched but a results
directory's own sweep. In a sweep, the models are what the sweep scored: the final checkpoints of
its finished trials, from its trial record (`trials.parquet`); `--include` adds the last checkpoint
of stopped, diverged or errored trials. Under a storage root, a sweep without its trial record
(its trials never all ended) or with a damaged one is skipped with one line; the others are
scored. Elsewhere a model is the latest `step-*` checkpoint of
RESULTS itself or of each run directory in it. A model held twice (copies of one run) is scored
once. Each sweep's models are scored into its own `results/` unless `--out` names one directory for
all. Only cells whose key is missing are evaluated, so a second run does nothing. The default grid
is the paper's 100+ set (the 101-160 diagonal; `make eval-100plus`).
"""

from __future__ import annotations

import argparse

from abacus_ray.api.evaluate_all import DEFAULT_GRIDS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "eval-all",
        help="score every checkpoint under a results root through Ray Data",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", metavar="RESULTS",
                   help="a sweep root, a storage root holding several sweeps, a sweep's results "
                        "directory or a directory of run directories: a path or an object-store "
                        "URI (s3://, gs://)")
    p.add_argument("--grid", dest="grids", action="append", default=None,
                   help=f"grid name or spec, repeatable (default: {', '.join(DEFAULT_GRIDS)}, "
                        "the 101-160 diagonal)")
    p.add_argument("--out", default=None,
                   help="one Parquet results directory for every model: a path or an "
                        "object-store URI (default: each sweep's own results/; for a directory "
                        "of runs, RESULTS/results)")
    p.add_argument("--include", default=None, metavar="STATUS[,STATUS]",
                   help="in a sweep, also score the last checkpoint of trials that ended "
                        "otherwise: a comma list of stopped (by ASHA or the user), diverged (its "
                        "last checkpoint before the loss stopped being finite), error (default: "
                        "finished trials only, what the sweep scored)")
    p.add_argument("--per-cell", type=int, default=None,
                   help="problems per cell (default: 100, eval.per_cell's default, not the "
                        "checkpoints' own)")
    p.add_argument("--seed", type=int, default=None,
                   help="evaluation seed (default: 0, eval.seed's default, not the "
                        "checkpoints' own)")
    p.add_argument("--address", default=None,
                   help="Ray address (default: $RAY_ADDRESS, else an embedded local Ray)")
    p.add_argument("--num-cpus", type=int, default=None,
                   help="CPUs for the embedded local Ray (default: all of this machine's)")
    p.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    from abacus_ray.api.evaluate_all import evaluate_all

    for p in evaluate_all(args.results, grids=args.grids, out=args.out, include=args.include,
                          per_cell=args.per_cell, seed=args.seed, address=args.address,
                          num_cpus=args.num_cpus):
        print(f"eval-all: {p.models} model(s), {p.cells} cells evaluated, {p.skipped} already "
              f"present, {p.seconds:.1f}s -> {p.out}")
    return 0
