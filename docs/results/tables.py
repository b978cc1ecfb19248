"""Markdown tables for docs/results.md, read straight from a sweep's Parquet results.

    python docs/results/tables.py lengths RESULTS... --by model.positions     # i = j diagonal, per length
    python docs/results/tables.py regions RESULTS... --by model.max_k         # ID / OOD region means
    python docs/results/tables.py cells RESULTS...                            # the (i, j) grid, one model kind
    python docs/results/tables.py cost SWEEP_DIR...                           # training cost per trial

Every number is a mean over training seeds of per-cell exact match (percent), followed by the
standard deviation and [min, max] over seeds, so a reader sees the spread, not just the mean.
Kept beside the doc (not in the package) because it formats this one report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from abacus_ray import storage  # noqa: E402
from abacus_ray.evaluation.aggregate import region_means  # noqa: E402
from abacus_ray.evaluation.results import read_cells  # noqa: E402


def pct(x: float) -> str:
    return f"{x:.1f}".removesuffix(".0")


def spread(values: pd.Series) -> str:
    """`mean ± std [min, max]` in percent over seeds; a single seed shows its value alone."""
    v = 100 * values.astype(float)
    if len(v) == 1:
        return pct(float(v.iloc[0]))
    return f"{pct(v.mean())} ± {pct(float(v.std(ddof=0)))} [{pct(v.min())}, {pct(v.max())}]"


def latest_models(cells: pd.DataFrame) -> pd.DataFrame:
    """Only the last evaluated model of each run (run_id + seed).

    An interrupted sweep evaluates the checkpoints its unfinished trials had reached; after the resume
    the finished model (a new model id) is evaluated too and both sit in the Parquet. The finished one
    is the one evaluated last.
    """
    keys = [k for k in ("run_id", "seed") if k in cells.columns]
    last = cells.groupby([*keys, "model_id"], dropna=False)["evaluated_at"].max().reset_index()
    keep = last.sort_values("evaluated_at").groupby(keys, dropna=False).tail(1)["model_id"]
    return cells[cells["model_id"].isin(set(keep))]


def lengths_table(cells: pd.DataFrame, by: list[str], lengths: list[int] | None) -> pd.DataFrame:
    """Rows: diagonal length n (i = j = n); columns: one per `by` group, `mean ± std [min, max]`."""
    diag = cells[cells["i"] == cells["j"]]
    if lengths:
        diag = diag[diag["i"].isin(lengths)]
    if diag.empty:
        raise ValueError("RESULTS: no i = j cells to tabulate")
    out: dict[str, dict[int, str]] = {}
    for key, group in diag.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in zip(by, key, strict=True))
        col = {}
        for n, g in group.groupby("i"):
            col[int(n)] = spread(g.groupby("seed")["accuracy"].mean())
        out[f"{label} (seeds={group['seed'].nunique()})"] = col
    table = pd.DataFrame(out)
    table.index.name = "n digits (i = j)"
    return table


def regions_table(cells: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Rows: one per `by` group; columns: the task's views (id, ood, ...), `mean ± std [min, max]`."""
    means = region_means(cells, extra_keys=[*by, "seed"])
    rows = []
    for key, group in means.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key, strict=True)) | {"seeds": int(group["seed"].nunique())}
        for view, g in group.groupby("view", sort=False):
            row[view] = spread(g["accuracy"])
        rows.append(row)
    return pd.DataFrame(rows)


def cells_table(cells: pd.DataFrame) -> pd.DataFrame:
    """The (i, j) grid: seed mean of each cell with its [min-max] over seeds, rows i, columns j."""
    per = cells.groupby(["i", "j", "seed"])["accuracy"].mean().unstack("seed")
    mean, lo, hi = (100 * per.mean(axis=1)).round(), (100 * per.min(axis=1)).round(), (100 * per.max(axis=1)).round()
    text = [f"{m:.0f}" if a == b else f"{m:.0f} [{a:.0f}-{b:.0f}]" for m, a, b in zip(mean, lo, hi, strict=True)]
    table = pd.Series(text, index=per.index).unstack("j")
    table.index.name = "i \\ j"
    return table


def cost_table(sweep_dir: Path) -> pd.DataFrame:
    """Per trial: steps, samples, training CPU-minutes (the loop's device-hours: 1 CPU x wall time in the
    loop) and the wall time Tune recorded for the trial (start-up and checkpoints included)."""
    rows = []
    for result in sorted((sweep_dir / "tune").glob("*/result.json")):
        lines = [json.loads(x) for x in storage.read_text(storage.on_disk(result)).splitlines() if x.strip()]
        if not lines:
            continue
        last = lines[-1]
        cfg = last.get("config", {}).get("trial", {})
        rows.append({"run": cfg.get("run_name", result.parent.name[:40]),
                     "seed": cfg.get("overrides", {}).get("seed"), "step": last.get("step"),
                     "samples": last.get("samples"),
                     "train_cpu_min": round(60 * last.get("device_hours", 0.0), 2),
                     "tune_wall_min": round(last.get("time_total_s", 0.0) / 60, 2)})
    if not rows:
        raise ValueError(f"SWEEP_DIR: no Tune result.json under {sweep_dir / 'tune'}")
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame, index: bool = True) -> str:
    """A GitHub markdown table (pandas' `to_markdown` needs `tabulate`, which the venv does not have)."""
    t = table.reset_index() if index else table
    head = [str(c) for c in t.columns]
    rows = [[("" if pd.isna(v) else str(v)) for v in r] for r in t.itertuples(index=False)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["lengths", "regions", "cells", "cost"])
    p.add_argument("path", nargs="+", help="results directories (lengths, regions) or sweep directories (cost); "
                   "several are concatenated (one seed per sweep run)")
    p.add_argument("--by", action="append", default=None, help="config column to group by (repeatable)")
    p.add_argument("--lengths", default=None, help="comma list of diagonal lengths to show")
    p.add_argument("--task", default=None, help="only rows of this task")
    p.add_argument("--csv", type=Path, default=None, help="also write the table as CSV here")
    args = p.parse_args(argv)
    try:
        if args.kind == "cost":
            table = pd.concat([cost_table(Path(p)) for p in args.path], ignore_index=True)
            print(markdown(table, index=False))
            if args.csv:
                storage.write_csv(storage.resolve(args.csv), table)
            print(f"\ntotal: {table['train_cpu_min'].sum():.1f} training CPU-minutes, "
                  f"{table['tune_wall_min'].sum():.1f} trial wall-minutes over {len(table)} trials")
            return 0
        cells = pd.concat([read_cells(storage.resolve(p)) for p in args.path], ignore_index=True)
        cells = latest_models(cells)
        if args.task:
            cells = cells[cells["task"] == args.task]
        by = args.by or ["model.positions"]
        if args.kind == "lengths":
            lengths = [int(x) for x in args.lengths.split(",")] if args.lengths else None
            table, index = lengths_table(cells, by, lengths), True
        elif args.kind == "cells":
            table, index = cells_table(cells), True
        else:
            table, index = regions_table(cells, by), False
        print(markdown(table, index=index))
        if args.csv:
            storage.write_csv(storage.resolve(args.csv), table, index=index)
    except (ValueError, OSError) as e:
        print(f"tables: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
