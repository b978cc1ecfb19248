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
import dataclasses
import re
from typing import TYPE_CHECKING

import pyarrow as pa

from abacus_ray import figures, storage
from abacus_ray.config import PRESETS, preset
from abacus_ray.evaluation.claim_record import claim_from_dict
from abacus_ray.evaluation.claims import Claim, Verdict, judge, per_seed
from abacus_ray.evaluation.places import read_each, results_dirs
from abacus_ray.evaluation.results import part_files, read_cells_table
from abacus_ray.storage import Location
from abacus_ray.sweep_dir import SweepDir

if TYPE_CHECKING:
    import pandas as pd

FIG10 = "fig10_k"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "summary",
        help="print region means per model from an eval results directory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "results",
        metavar="RESULTS",
        help="results directory, sweep root or storage root: a path or an "
             "object-store URI (s3://, gs://)",
    )
    p.add_argument("--label", action="append", default=None, metavar="COL",
                   help="config column to show per model (repeatable; default: "
                        "name, model.positions)")
    p.add_argument("--seeds", action="store_true",
                   help="mean, std, min, max over training seeds of models sharing every other "
                        "label (a run's name counts without its seed); with --diagonal, the "
                        "reach's min, median and max over those seeds")
    p.add_argument("--diagonal", action="store_true",
                   help="add, per model, the i = j diagonal's reach (longest length at >= 90 %%) "
                        "and the length from which every longer diagonal cell is 0 %% (Fig. 10)")
    p.add_argument("--compare", metavar="KEY", default=None,
                   help="a neutral comparison of one swept column (e.g. model.max_k): per value, "
                        "its models, the pooled ID and OOD exact match with 95 %% Wilson "
                        "intervals and, at several seeds, each seed's spread; no claim, no verdict")
    p.add_argument("--fig10", action="store_true",
                   help="Fig. 10's view of Abacus models that differ in model.max_k: one row "
                        "per model ordered by k, ID and OOD with 95 %% Wilson intervals, reach, "
                        "0 %% from, where the trained positions end, then Fig. 10's 'Conclusion "
                        "(Fig. 10): ...' line, which compares the offsets only where their 95 "
                        "%% intervals separate")
    p.set_defaults(func=handler)


def read_places(results: Location) -> tuple[pd.DataFrame, list[tuple[Location, pd.DataFrame]]]:
    """Every cell row under RESULTS as one DataFrame, and each results directory (one, or a storage
    root's several sweeps') with its own rows."""
    def read(d: Location) -> pa.Table:
        sweep = SweepDir.holding(d)
        if sweep is not None and storage.exists(sweep.spec):
            sweep.read_record()  # a damaged record is refused here, with its results
        return read_cells_table(d)

    # a place that holds no results is named itself
    tables = read_each(results_dirs(results, flag=""), read, "summary")
    places = [(d, t.to_pandas()) for d, t in tables]
    if len(places) == 1:
        return places[0][1], places
    return pa.concat_tables(
        [t for _, t in tables], promote_options="permissive"
    ).to_pandas(), places


def without_seed(name: object) -> object:
    """A run's name without its `seed=N` part: the name its seeds share."""
    return re.sub(r"_?seed=\d+", "", name) if isinstance(name, str) else name


def claim_for(sweep: str | None, cells: pd.DataFrame) -> Claim | None:
    """The claim that a sweep's rows answer: the claim of the figure named `sweep`, else of the
    sweep the rows name (`name` = NAME/trial), else the claim its `sweep.json` records (a sweep
    file's own `CLAIM`); None where nothing claims them."""
    names = [sweep] if sweep else []
    if "name" in cells.columns:
        names += sorted({str(n).split("/")[0] for n in cells["name"].dropna()})
    found = next((c for c in map(figures.claim, names) if c is not None), None)
    if found is not None or "results_dir" not in cells.columns or cells.empty:
        return found
    return recorded_claim(cells["results_dir"].iloc[0])


def recorded_claim(results: Location) -> Claim | None:
    """The claim the `sweep.json` of `results`' sweep records, if any."""
    sweep = SweepDir.holding(results)
    if sweep is None or not storage.is_file(sweep.spec):
        return None
    data = sweep.read_record().get("claim")
    if data is None:
        return None
    try:
        return claim_from_dict(data)
    except ValueError as e:
        raise ValueError(f"{sweep.spec}: its claim: {e}") from None


def verdict(results: Location, cells: pd.DataFrame) -> Verdict | None:
    """The verdict of the figure claim that `results` answer, or None where no figure claims them;
    judged at the scale the sweep ran at (a paper-scale threshold binds only there)."""
    sweep = SweepDir.holding(results)
    claim = claim_for(sweep.name if sweep is not None else None, cells) or recorded_claim(results)
    if claim is None:
        return None
    return judge(claim, cells, paper_scale=_paper_scale(results, cells))


def comparison(cells: pd.DataFrame, key: str) -> str:
    """`--compare KEY`: one line per value of `key`, with its models' pooled ID and OOD rates."""
    from abacus_ray.evaluation.claims import Cells, in_cells, rate

    if key not in cells.columns:
        raise ValueError(f"--compare: {key!r} is not a column of these results")
    lines = [f"{key}: ID and OOD exact match pooled over each value's models (95 % Wilson)"]
    for value, rows in cells.groupby(key, sort=True, dropna=False):
        parts = [f"{key} = {value}: {rows['model_id'].nunique()} model(s)"]
        for label, view in (("ID", "id"), ("OOD", "ood")):
            picked = in_cells(rows, Cells(label, view=view))
            if picked.empty:
                parts.append(f"{label} -")
                continue
            r = rate(picked, label, "exact")
            spread = (f", seeds {100 * min(r.seeds):.1f}-{100 * max(r.seeds):.1f} %"
                      if r.seeds else "")
            parts.append(r.text() + spread)
        lines.append("; ".join(parts))
    return "\n".join(lines)


def offsets_verdict(results: Location, cells: pd.DataFrame) -> Verdict:
    """Fig. 10's comparison of the largest offset k against the smallest: Fig. 10's own verdict
    (with the paper's value) where the rows are its sweep's, else the same comparison in neutral
    words: another experiment (a k sweep on subtraction) is not the paper's size-20 addition."""
    claim = figures.claim(FIG10)
    sweep = SweepDir.holding(results)
    if claim_for(sweep.name if sweep is not None else None, cells) != claim:
        claim = dataclasses.replace(claim, figure="offsets k", paper="")
    return judge(claim, cells, paper_scale=_paper_scale(results, cells))


def _paper_scale(results: Location, cells: pd.DataFrame) -> bool:
    return scale_of(_sweep_record(results), cells) == "paper"


def seed_verdicts(results: Location, cells: pd.DataFrame, found: Verdict) -> str:
    """Each training seed's verdict alone (`seed 0: shown, ...` and how many differ from the
    pooled one), or "-" for one seed."""
    seeds = per_seed(found.claim, cells, paper_scale=_paper_scale(results, cells))
    if not seeds:
        return "-"
    flips = sum(v != found.verdict for _, v in seeds)
    return (", ".join(f"seed {s}: {v}" for s, v in seeds)
            + f" ({flips} of {len(seeds)} unlike the pooled verdict)")


def sweep_conclusion(results: Location) -> str | None:
    """The `Conclusion:` line of a sweep's results directory (None: no results yet, or no claim)."""
    if not part_files(results):
        return None
    found = verdict(results, read_cells_table(results).to_pandas())
    return found.line() if found is not None else None


def _sweep_record(results: Location) -> dict | None:
    sweep = SweepDir.holding(results)
    if sweep is None or not storage.exists(sweep.spec):
        return None
    return sweep.read_record()


def scale_of(record: dict | None, cells: pd.DataFrame) -> str:
    """The preset a sweep ran at: its `sweep.json`'s, else the preset whose
    model width the rows have."""
    if record and record.get("preset"):
        return str(record["preset"])
    widths = set(cells["model.hidden"].dropna()) if "model.hidden" in cells.columns else set()
    named = [p for p in PRESETS if widths == {preset(p).model.hidden}]
    return named[0] if named else "custom" if widths else "-"


def claims_table(places: list[tuple[Location, pd.DataFrame]]) -> str:
    """A Markdown table, one row per sweep: what its figure claims, what the paper reports and what
    its results decide."""
    lines = [
        "| sweep | figure | claim | paper | verdict | evidence | per seed | scale | trials |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for results, cells in places:
        record = _sweep_record(results)
        sweep = SweepDir.holding(results)
        name = sweep.name if sweep is not None else str(results)
        found = verdict(results, cells)
        models = cells["model_id"].nunique()
        trials = (
            f"{models}/{len(record['trials'])}" if record and record.get("trials") else str(models)
        )
        row = (
            [name, found.claim.figure, found.claim.text, found.claim.paper or "-"]
            + [found.verdict, found.evidence, seed_verdicts(results, cells, found)]
            if found
            else [name, "-", "no figure claims this sweep", "-", "-", "-", "-"]
        ) + [scale_of(record, cells), trials]
        lines.append(_row(row))
    lines += [_row(row) for row in across_rows(places)]
    return "\n".join(lines)


def _row(cells: list) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def across_rows(places: list[tuple[Location, pd.DataFrame]]) -> list[list[str]]:
    """The claims-table rows of claims that span sweeps (`figures.across`), each judged on its
    sweeps' rows together where all of them are present."""
    import pandas as pd

    by_name = {}
    for results, cells in places:
        sweep = SweepDir.holding(results)
        if sweep is not None:
            by_name[sweep.name] = (results, cells)
    rows = []
    for name, (results, cells) in sorted(by_name.items()):
        spans = figures.across(name)
        if spans is None or any(s not in by_name for s in spans.sweeps):
            continue
        both = pd.concat([cells, *(by_name[s][1] for s in spans.sweeps)], ignore_index=True)
        found = judge(spans.claim, both, paper_scale=_paper_scale(results, cells))
        c = found.claim
        rows.append([" + ".join([name, *spans.sweeps]), c.figure, c.text, c.paper or "-",
                     found.verdict, found.evidence, seed_verdicts(results, both, found),
                     scale_of(_sweep_record(results), cells), str(both["model_id"].nunique())])
    return rows


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
    cells, places = read_places(results)
    top = results.path.rstrip("/")
    # a storage root
    several = len(places) > 1 or places[0][0].parent.parent.path.rstrip("/") == top
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
        print(claims_table(places))
    elif (found := verdict(*places[0])) is not None:
        print(found.line())
    return 0
