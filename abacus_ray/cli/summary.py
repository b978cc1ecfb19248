"""`abacus-ray summary`: region means per model from results, as a table, and each figure's verdict.

    abacus-ray summary RESULTS [--label COL ...] [--seeds] [--diagonal]
    abacus-ray summary RESULTS --fig10

Each row is one model under one set of eval settings; columns are the paper's views in percent
(+ - x OR: id, ood, ood100plus; sorting: id, ood_digits_30, ood_array_30, all_ood_30, all_ood_20),
each the mean of per-cell exact-match accuracies (docs/official-code.md §7.7). `--seeds` groups
models that differ only in their training seed and prints the mean and spread over seeds instead.
RESULTS is a results directory, a sweep root (holding `results/`) or a storage root holding several
sweeps, as for `dashboard`.

Where the results are a figure's sweep, the table is followed by that figure's `Conclusion:` line:
its claim (`abacus_ray/figures/`) shown, contradicted, not shown at this scale or not learned at
this scale, with each arm's ID rate and the numbers and intervals that decide it. Of a storage
root, a Markdown table follows instead, one row per sweep (and one per claim that spans two sweeps,
such as Fig. 16's unmasked runs against Fig. 3's masked ones, where both ran): sweep, figure,
claim, paper (what the paper reports for the same arms and cells), verdict, evidence, per seed (at
two or more training seeds, each seed's verdict alone and how many differ from the pooled one),
scale (the preset in its `sweep.json`), trials (models evaluated / trials declared).
"""

from __future__ import annotations

import argparse

from abacus_ray import storage
from abacus_ray.api.verdicts import (
    claims_table,
    comparison,
    offsets_verdict,
    read_results,
    verdict,
    without_seed,
)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "summary",
        help="print region means per model from an eval results directory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("results", metavar="RESULTS",
                   help="a results directory, a sweep root (holding results/) or a storage root "
                        "holding several sweeps: a path or an object-store URI (s3://, gs://)")
    p.add_argument("--label", action="append", default=None, metavar="COL",
                   help="config column to show per model, repeatable (default: name and "
                        "model.positions)")
    p.add_argument("--seeds", action="store_true",
                   help="mean, std, min and max over training seeds of models sharing every "
                        "other label (a run's name counts without its seed=N part); with "
                        "--diagonal, the reach's min, median and max over those seeds, never "
                        "the best seed's alone")
    p.add_argument("--diagonal", action="store_true",
                   help="per model, the i = j diagonal's reach (longest length at >= 90 %%) "
                        "and the length from which every longer diagonal cell is 0 %% (Fig. 10)")
    p.add_argument("--compare", metavar="KEY", default=None,
                   help="a neutral comparison of one swept column (e.g. model.max_k): per value, "
                        "its models and their pooled ID and OOD exact match with 95 %% Wilson "
                        "intervals (at several seeds, each seed's spread too); no claim, no "
                        "verdict")
    p.add_argument("--fig10", action="store_true",
                   help="Fig. 10's view of Abacus models that differ in model.max_k: one row "
                        "per model, ordered by k, with ID and OOD and their 95 %% Wilson "
                        "intervals, reach, 0 %% from and where the trained positions end; then "
                        "Fig. 10's 'Conclusion (Fig. 10):' line where the rows are Fig. 10's "
                        "sweep, else the same comparison as 'Conclusion (offsets k):' without "
                        "the paper's words")
    p.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    # heavy: pandas, only once the command runs (`abacus-ray --help` imports every command's module)
    import pandas as pd

    from abacus_ray.evaluation.aggregate import (  # pandas, as above
        diagonal_reach,
        format_table,
        reach_over_seeds,
        region_means,
        seed_spread,
        summary_table,
    )
    from abacus_ray.evaluation.offset_reach import format_offset_table, offset_table  # pandas

    # resolved once: a bad URI is refused naming RESULTS, in seconds
    results = storage.probe(args.results, "RESULTS", write=False)
    cells, per_dir = read_results(results)
    top = results.path.rstrip("/")
    # a storage root
    several = len(per_dir) > 1 or per_dir[0][0].parent.parent.path.rstrip("/") == top
    if args.compare:
        print(comparison(cells, args.compare))
        return 0
    if args.fig10:
        table = offset_table(cells)
        print(format_offset_table(table))
        print(offsets_verdict(results, cells).line())
        return 0
    labels = tuple(args.label) if args.label else ("name", "model.positions")
    missing = [c for c in labels if c not in cells.columns]
    if missing:
        raise ValueError(f"--label: {missing[0]!r} is not a column of {args.results}")
    if args.seeds:
        if "name" in cells.columns:  # a run's name carries its seed (NAME/..._seed=1)
            cells = cells.assign(name=cells["name"].map(without_seed))
        group = [c for c in labels if c != "seed"] + ["recurrences", "eval_seed", "per_cell"]
        means = region_means(cells, extra_keys=group + ["seed"])
        table = seed_spread(means, group)
        for col in ("mean", "std", "min", "max"):
            table[col] = 100 * table[col]
        print(format_table(table))
        if args.diagonal:
            print()
            print(format_table(reach_over_seeds(cells, group)))
    else:
        table = summary_table(cells, labels)
        if args.diagonal:
            reach = diagonal_reach(cells)
            on = [
                k for k in reach.columns if k in table.columns and k not in ("reach", "zero_from")
            ]
            table = table.merge(reach[[*on, "reach", "zero_from"]], on=on, how="left")
            for col in ("reach", "zero_from"):
                table[col] = [("-" if pd.isna(v) else str(int(v))) for v in table[col]]
        print(format_table(table))
    if several:
        print()
        print(claims_table(per_dir))
    elif (found := verdict(*per_dir[0])) is not None:
        print(found.line())
    return 0
