"""`abacus-ray plan [NAME ...] [--all] [flags]`: what a reproduction costs before it starts.

For one or more sweeps (figures by name, or sweep files; `--all`: every figure and table), expanded
exactly as `abacus-ray sweep NAME --preset P --seeds N --set K=V` would expand them: the trials,
their training budget in A4000-hours, device-hours of training and device-minutes of grid evaluation
on named GPUs (peak dense bf16 from the vendors' data sheets times a model-FLOP utilisation, `--mfu`
to override), the checkpoint and Parquet bytes they leave in storage, and with `--price
GPU=USD_PER_HOUR` the bill. For CPU-scale sweeps (the `tiny` preset, or `cluster.use_gpu=false`, or
with `--cores`): core-hours of training and evaluation from one core's measured speed, and
wall-hours on `--cores` cores. Nothing starts and nothing is written; the paper preset's whole
reproduction plans in seconds. The arithmetic and its sources: `abacus_ray/plan.py`; its error
against a measured run: docs/performance.md, "Planning a reproduction".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections import Counter

from abacus_ray import figures
from abacus_ray.api.sweeps import expand, load_sweep, search_of
from abacus_ray.cli import CLIError
from abacus_ray.cli.sweep import parse
from abacus_ray.plan import (
    DEVICES,
    MAX_CORES,
    MAX_SEEDS,
    SweepPlan,
    parse_per_gpu,
    resolve_devices,
    summarise,
    trial_cost,
)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plan",
        help="what sweeps cost before they run: trials, GPU-hours, storage, money",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sweeps", nargs="*", metavar="NAME",
                   help="figures (e.g. fig10_k) or sweep files")
    p.add_argument("--all", action="store_true",
                   help="every figure and table of abacus_ray/figures/ (none found: refused, "
                        "exit status 2)")
    p.add_argument("--preset", choices=["tiny", "paper"], default="paper",
                   help="the sweeps' preset: paper (the scale a cluster runs) or tiny "
                        "(default: %(default)s)")
    p.add_argument("--seeds", type=int, default=None,
                   help=f"training seeds per configuration, at most {MAX_SEEDS} (default: each "
                        "figure's)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for every trial of every sweep, repeatable")
    p.add_argument("--gpu", dest="gpus", action="append", default=None, metavar="NAME",
                   help="a GPU to price the work on, repeatable (default: all of "
                        f"{', '.join(DEVICES)})")
    p.add_argument("--mfu", action="append", default=[], metavar="[GPU=]FRACTION",
                   help="training model-FLOP utilisation, for every GPU or one, repeatable; "
                        "evaluation keeps its measured ratio to it (default: the measured or "
                        "stated MFU of each GPU)")
    p.add_argument("--price", action="append", default=[], metavar="GPU=USD_PER_HOUR",
                   help="price of one GPU-hour of a planned GPU (--gpu), repeatable: adds the "
                        "cost of training and evaluation")
    p.add_argument("--cores", type=int, default=None, metavar="N",
                   help="CPU cores for the CPU columns: core-hours of training and evaluation "
                        "(one core's measured model FLOP/s at the model's width, "
                        "abacus_ray/training/cpu_rates.py) and wall-hours on N cores; shown for "
                        "the tiny preset, for cluster.use_gpu=false and whenever --cores is "
                        "given; a plan of CPU-scale sweeps shows GPU columns only with --gpu "
                        "(default: this machine's)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=handler)


def sweep_plan(name: str, args: argparse.Namespace) -> SweepPlan:
    """One sweep's plan, through the sweep command's own parser (cli/sweep.py) and expansion
    (api/sweeps.py). Seeds do not change a trial's cost, so a plain sweep is expanded with one
    seed and each point counted N times."""
    sweep = load_sweep(name)
    argv = ["--preset", args.preset, *(f"--set={s}" for s in args.overrides)]
    parsed = parse(sweep, argv + (["--seeds", str(args.seeds)] if args.seeds else []))
    if isinstance(parsed, int):
        raise CLIError(f"{name}: its flags were refused (above)")
    options, _ = parsed
    search = search_of(sweep, options)
    seeds = 1
    if search is None:
        scale = sweep.scale(args.preset)
        seeds = args.seeds or (scale.seeds if scale.seeds is not None else sweep.seeds)
        options = dataclasses.replace(options, seeds=1)
    trials = expand(sweep, options, search)
    recurrences = sweep.eval_recurrences_for(args.preset)
    counts = Counter(trial_cost(t.config, recurrences) for t in trials)
    on_cpu = args.preset == "tiny" or any(t.config.cluster.use_gpu is False for t in trials)
    costs = tuple((c, n * seeds) for c, n in counts.items())
    return SweepPlan(sweep.name, args.preset, costs, on_cpu)


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f}"


def table(summary: dict, cpu: bool = False) -> str:
    """The plan for people: a row per sweep, then the total; `cpu`: core- and wall-hours too."""
    gpus = list(summary["assumptions"])
    money = [g for g in gpus if "usd_per_hour" in summary["assumptions"][g]]
    cores = summary["cpu_basis"]["cores"]
    cpu_head = ["core-h train", "core-h eval", f"wall-h {cores} cores"] if cpu else []
    head = ["sweep", "trials", *cpu_head, "A4000-h", *(f"{g} train h" for g in gpus),
            *(f"{g} eval min" for g in gpus), "ckpt GB", "parquet MB", *(f"{g} USD" for g in money)]

    def cells(name: str, r: dict) -> list[str]:
        c = r["cpu"]
        cpu_cells = [f"{c['train_core_hours']:,.2f}", f"{c['eval_core_hours']:,.2f}",
                     f"{c['wall_hours']:,.2f}"] if cpu else []
        return [
            name,
            f"{r['trials']:,}",
            *cpu_cells,
            f"{r['a4000_hours']:,.1f}",
            *(f"{r['gpus'][g]['train_hours']:,.1f}" for g in gpus),
            *(f"{r['gpus'][g]['eval_minutes']:,.0f}" for g in gpus),
            _gb(r["checkpoint_bytes"]),
            f"{r['parquet_bytes'] / 1e6:,.0f}",
            *(f"{r['gpus'][g]['usd']:,.0f}" for g in money),
        ]

    rows = [cells(r["sweep"], r) for r in summary["sweeps"]] + [cells("TOTAL", summary["total"])]
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    fmt = lambda r: "  ".join(  # noqa: E731
        x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(r, widths, strict=True))
    )
    notes = [
        f"{g}: {a['peak_tflops']:g} TFLOP/s dense bf16 ({a['sheet']}); training MFU "
        f"{a['train_mfu']:.3f} ({a['mfu_basis']}), evaluation {a['eval_mfu']:.3f}"
        for g, a in summary["assumptions"].items()
    ]
    if cpu:
        notes.append(f"CPU: one core's model FLOP/s measured on {summary['cpu_basis']['machine']} "
                     "(abacus_ray/training/cpu_rates.py, benchmarks/cpu_throughput.py)")
    return "\n".join(
        [fmt(head), *map(fmt, rows[:-1]), "-" * len(fmt(head)), fmt(rows[-1]), "", *notes]
    )


def cpu_words(cpu: dict, cores: int) -> str:
    """Core- and wall-hours in words, e.g. "CPU 1.20 core-hours (0.90 train + 0.30 eval), 0.60
    wall-hours on 2 cores"."""
    return (f"CPU {cpu['core_hours']:,.2f} core-hours ({cpu['train_core_hours']:,.2f} train + "
            f"{cpu['eval_core_hours']:,.2f} eval), {cpu['wall_hours']:,.2f} wall-hours on "
            f"{cores} cores")


def total_line(summary: dict, cpu: bool = False) -> str:
    t = summary["total"]
    per_gpu = "; ".join(
        f"{g} {v['train_hours']:,.0f} h train + {v['eval_minutes']:,.0f} min eval"
        + (f" = USD {v['usd']:,.0f}" if "usd" in v else "")
        for g, v in t["gpus"].items()
    )
    if cpu:
        cores = summary["cpu_basis"]["cores"]
        per_gpu = "; ".join(filter(None, [cpu_words(t["cpu"], cores), per_gpu]))
    return (f"total: {t['trials']:,} trials, {t['a4000_hours']:,.0f} A4000-hours; {per_gpu}; "
            f"checkpoints {_gb(t['checkpoint_bytes'])} GB, Parquet {t['parquet_bytes'] / 1e6:,.0f} "
            f"MB ({t['eval_cells']:,} cells)")


def handler(args: argparse.Namespace) -> int:
    if args.seeds is not None and not 1 <= args.seeds <= MAX_SEEDS:  # before any expansion
        raise CLIError(f"--seeds: must be in 1..{MAX_SEEDS}, got {args.seeds}")
    if args.all == bool(args.sweeps):
        raise CLIError("NAME: give one or more sweeps or --all (not both)")
    if args.cores is not None and not 1 <= args.cores <= MAX_CORES:
        raise CLIError(f"--cores: must be in 1..{MAX_CORES:,}, got {args.cores}")
    devices = resolve_devices(args.gpus or list(DEVICES))
    if any("=" not in p for p in args.price):
        raise CLIError("--price: give GPU=USD_PER_HOUR, e.g. --price H100=2.5")
    mfu = parse_per_gpu(args.mfu, "--mfu", devices, low=0.01, high=1.0)
    price = parse_per_gpu(args.price, "--price", devices, low=0.0, high=1e4)
    names = list(figures.names()) if args.all else list(dict.fromkeys(args.sweeps))
    if not names:  # a total over nothing would read as a free reproduction
        raise CLIError("--all: no figures found in abacus_ray.figures (a broken "
                       "installation?); nothing to plan")
    plans = [sweep_plan(n, args) for n in names]
    cpu = args.cores is not None or any(p.cpu_scale for p in plans)
    if cpu and not args.gpus and all(p.cpu_scale for p in plans):
        devices = []  # a CPU-scale plan: GPU columns only when asked for with --gpu
    summary = summarise(plans, devices, mfu, price, args.cores or os.cpu_count() or 1)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(table(summary, cpu))
        print(total_line(summary, cpu))
    return 0
