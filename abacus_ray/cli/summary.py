"""`abacus-ray summary`: region means per model from results, as a table.

    abacus-ray summary RESULTS [--label COL ...] [--seeds] [--diagonal]
    abacus-ray summary RESULTS --fig10

Each row is one model under one set of eval settings; columns are the paper's views in percent
(+ - x OR: id, ood, ood100plus; sorting: id, ood_digits_30, ood_array_30, all_ood_30, all_ood_20),
each the mean of per-cell exact-match accuracies (docs/official-code.md §7.7). `--seeds` groups models that differ
only in their training seed and prints the mean and spread over seeds instead. RESULTS is a results
directory, a sweep root (holding `results/`) or a storage root holding several sweeps, as for `dashboard`.
"""

from __future__ import annotations

import argparse

import pyarrow as pa

from abacus_ray.evaluation.places import results_dirs
from abacus_ray.evaluation.results import read_cells_table


def register(subparsers) -> None:
    p = subparsers.add_parser("summary", help="print region means per model from an eval results directory",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", metavar="RESULTS", help="results directory, sweep root or storage root: a path or an object-store URI (s3://, gs://)")
    p.add_argument("--label", action="append", default=None, metavar="COL",
                   help="config column to show per model (repeatable; default: name, model.positions)")
    p.add_argument("--seeds", action="store_true",
                   help="mean, std, min, max over training seeds of models sharing every other label")
    p.add_argument("--diagonal", action="store_true",
                   help="add, per model, the i = j diagonal's reach (longest length at >= 90 %%) and the length "
                        "from which every longer diagonal cell is 0 %% (Fig. 10)")
    p.add_argument("--fig10", action="store_true",
                   help="Fig. 10's view of Abacus models that differ in model.max_k: one row per model ordered by k, "
                        "ID and OOD with 95 %% Wilson intervals, reach, 0 %% from, where the trained positions end, "
                        "then one line 'Conclusion: ...' that compares only where intervals separate")
    p.set_defaults(func=handler)


def read_results(target: str):
    """Every cell row under RESULTS (one results directory or several sweeps') as one DataFrame."""
    # a bad URI is refused naming RESULTS, in seconds; a place that holds no results is named itself
    tables = [read_cells_table(d) for d in results_dirs(target, flag="")]
    return pa.concat_tables(tables, promote_options="permissive").to_pandas()


def handler(args: argparse.Namespace) -> int:
    # heavy: pandas, only once the command runs (`abacus-ray --help` imports every command's module)
    import pandas as pd

    from abacus_ray.evaluation.aggregate import (  # pandas, as above
        diagonal_reach,
        format_table,
        region_means,
        seed_spread,
        summary_table,
    )
    from abacus_ray.evaluation.offset_reach import conclusion, format_offset_table, offset_table  # pandas

    cells = read_results(args.results)
    if args.fig10:
        table = offset_table(cells)
        print(format_offset_table(table))
        print(conclusion(cells, table))
        return 0
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
        table = summary_table(cells, labels)
        if args.diagonal:
            reach = diagonal_reach(cells)
            on = [k for k in reach.columns if k in table.columns and k not in ("reach", "zero_from")]
            table = table.merge(reach[[*on, "reach", "zero_from"]], on=on, how="left")
            for col in ("reach", "zero_from"):
                table[col] = [("-" if pd.isna(v) else str(int(v))) for v in table[col]]
        print(format_table(table))
    return 0
