"""`abacus-ray summary`: region means per model from a results directory, as a table.

    abacus-ray summary RESULTS [--label COL ...] [--seeds]

Each row is one model under one set of eval settings; columns are the paper's views in percent
(+ - x OR: id, ood, ood100plus; sorting: id, ood_digits_30, ood_array_30, all_ood_30, all_ood_20),
each the mean of per-cell exact-match accuracies (docs/official-code.md §7.7). `--seeds` groups models that differ
only in their training seed and prints the mean and spread over seeds instead.
"""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser("summary", help="print region means per model from an eval results directory",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", metavar="RESULTS", help="results directory written by `abacus-ray eval`")
    p.add_argument("--label", action="append", default=None, metavar="COL",
                   help="config column to show per model (repeatable; default: name, model.positions)")
    p.add_argument("--seeds", action="store_true",
                   help="mean, std, min, max over training seeds of models sharing every other label")
    p.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    from abacus_ray.evaluation.aggregate import format_table, region_means, seed_spread, summary_table
    from abacus_ray.evaluation.results import read_cells

    cells = read_cells(args.results)
    labels = tuple(args.label) if args.label else ("name", "model.positions")
    missing = [c for c in labels if c not in cells.columns]
    if missing:
        raise ValueError(f"--label: {missing[0]!r} is not a column of {args.results}")
    if args.seeds:
        group = [c for c in labels if c != "seed"] + ["recurrences", "eval_seed", "per_cell"]
        means = region_means(cells, extra_keys=group + ["seed"])
        table = seed_spread(means, group)
        for col in ("mean", "std", "min", "max"):
            table[col] = 100 * table[col]
        print(format_table(table))
    else:
        print(format_table(summary_table(cells, labels)))
    return 0
