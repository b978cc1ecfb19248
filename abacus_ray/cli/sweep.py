"""`abacus-ray sweep NAME [flags]`: one paper figure's sweep, trained through Tune + Train on Ray,
evaluated through Ray Data into Parquet, then drawn as dashboards.

NAME is a figure (`fig10_k`: its sweep ships in `abacus_ray/figures/`) or the path of a sweep file.
`python sweeps/fig10_k.py [flags]` (also under `ray job submit`) is the same command. `--dry-run`
prints the expanded trials, each with its full resolved config, and starts nothing: check a sweep
here before spending GPU-hours on it (it checks what the real run checks before Ray starts,
`--storage` probed included). Every flag is validated before Ray is imported or started: bad input
costs no cluster time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from abacus_ray.api.sweeps import (
    SweepOptions,
    SweepPlan,
    SweepResult,
    available,
    load_sweep,
    options_from,
    parse_axes,
    prepare,
)
from abacus_ray.api.sweeps import run as run_plan
from abacus_ray.cli import ArgumentParser, add_plugin_flag, guarded, parse_args
from abacus_ray.sweep import Sweep
from abacus_ray.sweep_dir import SweepDir
from abacus_ray.training.budget import budget_terms


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="run one paper figure's sweep: train, evaluate, dashboards",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"sweeps: {', '.join(available())}",
    )
    p.add_argument("--new", metavar="PATH", default=None,
                   help="write a commented sweep file of one's own at PATH (SWEEP, its tiny "
                        "scale, a CLAIM, the __main__ block) and stop; then run it as NAME")
    p.add_argument(
        "sweep", metavar="NAME", nargs="?", default=None,
        help="a figure (e.g. fig10_k), a sweep file of ./sweeps/ or the path of a sweep file"
    )
    p.add_argument(
        "flags",
        nargs=argparse.REMAINDER,
        help="the sweep's flags; see abacus-ray sweep NAME --help",
    )
    p.set_defaults(func=handler)


def add_search_flags(p: argparse.ArgumentParser) -> None:
    """The flags of a sweep that searches (`Search`): its sample count, ASHA's grace, --confirm."""
    p.add_argument(
        "--samples",
        type=int,
        default=None,
        help="points the search tries (default: the sweep's)",
    )
    p.add_argument("--grace-steps", type=int, default=None,
                   help="optimiser steps before ASHA may stop a trial (default: the sweep's)")
    p.add_argument("--confirm", action="store_true",
                   help="instead of searching: retrain the best point of this sweep's "
                        f"finished search (its {SweepDir.SEARCH} under --storage) with several "
                        "seeds for each value of the compared axes, as the sweep NAME_confirm")


def build_parser(sweep: Sweep) -> argparse.ArgumentParser:
    p = ArgumentParser(prog=f"abacus-ray sweep {sweep.name}", description=sweep.caption)
    p.add_argument("--preset", choices=["tiny", "paper"], default="tiny",
                   help="tiny: CPU-minutes per model; paper: the paper's setting (GPU cluster) "
                        "(default: %(default)s)")
    p.add_argument("--seeds", type=int, default=None,
                   help="training seeds per configuration (default: the figure's)")
    p.add_argument("--budget-hours", type=float, default=None,
                   help="a wall-clock limit per trial in device-hours: wall hours x devices "
                        "(GPU-hours on GPUs), so 24 on 8 workers stops after 3 wall-hours; the "
                        "paper preset's budget is in A4000-hours of model FLOPs "
                        "(train.budget_a4000_hours), the same samples on any GPU")
    p.add_argument("--storage", default="results",
                   help="where trials, checkpoints and Parquet results go: a directory on one "
                        "machine, a mount every node sees, or an object-store URI, "
                        "s3://BUCKET/PREFIX (AWS credentials from the standard variables or "
                        "~/.aws; an S3-compatible server from AWS_ENDPOINT_URL_S3 or "
                        "AWS_ENDPOINT_URL, or ?endpoint_override=HOST:PORT&scheme=http) or "
                        "gs://BUCKET/PREFIX; probed before Ray starts (default: %(default)s)")
    p.add_argument("--address", default=None,
                   help="Ray cluster address (default: $RAY_ADDRESS, else an embedded "
                        "local Ray on 127.0.0.1)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="extra config override for every trial, repeatable, e.g. --set "
                        "train.max_steps=100")
    add_plugin_flag(p, "the config records it (plugins), and the sweep ships the file to its "
                       "Ray workers")
    p.add_argument("--axis", dest="axes", action="append", default=[], metavar="KEY=V1,V2",
                   help="sweep one more config key over a comma list of values, repeatable: "
                        "crossed with the sweep's own axes, or, for a key the sweep already "
                        "sweeps, taking its values' place; trials are named by their values "
                        "(fig10_k --axis train.lr=1e-3,3e-3 trains 4: fig10_k/max_k=1_lr=1e-3, "
                        "...)")
    p.add_argument("--per-cell", type=int, default=None,
                   help="problems per evaluation cell (default: the preset's, or the figure's "
                        "where it sets one)")
    p.add_argument("--grid", dest="grids", action="append", default=None,
                   help="evaluation grid name or spec, repeatable (default: the figure's grids)")
    p.add_argument("--max-trials", type=int, default=None,
                   help="run only this many trials, the first of the expansion (variants, then "
                        "axes, then seeds) (default: all of them)")
    for flag in sweep.flags:
        p.add_argument(
            flag.name, default=None, help=f"{flag.help} (sets {flag.key}; a comma list sweeps it)"
        )
    if sweep.search is not None or sweep.tiny.search is not None or sweep.paper.search is not None:
        add_search_flags(p)
    p.add_argument("--break-lease", action="store_true",
                   help="take over the sweep directory's lease (.lease, held while a sweep runs) "
                        "from a run that is gone where this machine cannot tell (another "
                        "host's); a killed run of this host is taken over without it, with a "
                        "line saying so")
    p.add_argument("--dry-run", action="store_true",
                   help="print the expanded trials (name, swept values, budget, full resolved "
                        "config) as JSON; start nothing, but check what the run checks before "
                        "Ray starts (--storage probed, --num-cpus, tracking)")
    p.add_argument("--no-eval", action="store_true", help="train only")
    p.add_argument("--tracking", choices=("mlflow", "wandb", "none"), default="mlflow",
                   help="one run per trial: mlflow in a SQLite store (the sweep's "
                        f"{SweepDir.TRACKING_STORE}: under --storage when it is a directory, "
                        "else on this machine under ~/.abacus-ray/; the path is printed; "
                        "mlflow ui --backend-store-uri sqlite:///PATH --host 127.0.0.1 shows "
                        "it), wandb (offline) or none (default: %(default)s)")
    p.add_argument("--tracking-uri", default=None, metavar="URI",
                   help="an MLflow tracking server (http://HOST:PORT) to log to instead of "
                        "the local SQLite store")
    p.add_argument("--no-dashboard", action="store_true", help="do not build the dashboards")
    p.add_argument("--num-cpus", type=int, default=None,
                   help="CPUs for the embedded local Ray (default: all of this machine's)")
    return p


def options(sweep: Sweep, args: argparse.Namespace) -> SweepOptions:
    """The parsed flags as the one object a sweep runs under; a figure's own flags (`--k 4,8`) are
    axes as `--axis` gives them."""
    axes = parse_axes(args.axes)
    for flag in sweep.flags:
        value = getattr(args, flag.name.lstrip("-").replace("-", "_"))
        if value is not None:
            if flag.key in axes:
                raise ValueError(f"--axis {flag.key}: also given by {flag.name}; give it once")
            axes[flag.key] = [v.strip() for v in value.split(",") if v.strip()]
            if not axes[flag.key]:
                raise ValueError(f"{flag.name}: no value in {value!r}; give one "
                                 "value or a comma list")
    return options_from(
        args.overrides, preset=args.preset, seeds=args.seeds, storage=args.storage,
        address=args.address, plugins=args.plugins, axes=axes, budget_hours=args.budget_hours,
        per_cell=args.per_cell, grids=args.grids, max_trials=args.max_trials,
        samples=getattr(args, "samples", None), grace_steps=getattr(args, "grace_steps", None),
        confirm=getattr(args, "confirm", False), break_lease=args.break_lease,
        evaluate=not args.no_eval, tracking=args.tracking, tracking_uri=args.tracking_uri,
        dashboard=not args.no_dashboard, num_cpus=args.num_cpus)


def parse(sweep: Sweep, argv: list[str]) -> tuple[SweepOptions, bool] | int:
    """The sweep's flags as `SweepOptions` and whether `--dry-run` was given, or the exit status
    argparse chose (0 after --help, 2 after a one-line usage error)."""
    parsed = parse_args(build_parser(sweep), argv)
    if isinstance(parsed, int):
        return parsed
    return options(sweep, parsed), parsed.dry_run


def dry_run_text(checked: SweepPlan) -> str:
    """`--dry-run`: the expanded trials, each with its full resolved config, as JSON."""
    o = checked.options
    return json.dumps({
        "sweep": checked.sweep.name,
        "caption": checked.sweep.caption,
        "claim": checked.claim,
        "preset": o.preset,
        "eval_recurrences": list(checked.sweep.eval_recurrences_for(o.preset)),
        "search": dataclasses.asdict(checked.search) if checked.search else None,
        "trials": [{"name": t.name, "params": t.params,
                    "budget": budget_terms(t.config, t.config.cluster.workers),
                    "config": t.config.to_dict()} for t in checked.trials],
    }, indent=2)


def handler(args: argparse.Namespace) -> int:
    if args.new is not None:
        from abacus_ray.cli.new_sweep import write_template

        path = write_template(args.new)
        print(f"wrote {path}: edit it, then `abacus-ray sweep {path} --dry-run`")
        return 0
    if args.sweep is None:
        raise ValueError("NAME: give a sweep to run (a figure such as fig10_k, or a sweep file), "
                         "or --new PATH to write one")
    return run(load_sweep(args.sweep), args.flags)


def run(sweep: Sweep, argv: list[str]) -> int:
    """Parse the sweep's flags, then print its dry run, or run it and print what it found."""
    parsed = parse(sweep, argv)
    if isinstance(parsed, int):  # --help (0) or a one-line usage error (2)
        return parsed
    given, dry = parsed
    checked = prepare(sweep, given)
    for note in checked.notes:  # a growth, a bucket's MLflow store: on stderr, beside the JSON
        print(note, file=sys.stderr)
    if dry:
        print(dry_run_text(checked))
        return 0
    return report(run_plan(checked), len(checked.trials))


def report(found: SweepResult, total: int) -> int:
    """Print where the sweep's results are, its dashboard and its `Conclusion:` line; the last
    line names the trials that failed and why (exit 1), the others' results staying."""
    from abacus_ray.cluster.driver import failure_line  # Ray: only after a sweep ran

    if found.dashboard is not None:
        print(f"{found.name}: dashboard {found.dashboard}", file=sys.stderr)
    print(f"{found.name}: results in {found.root}")
    if found.conclusion is not None:
        print(found.conclusion)
    if found.failures:
        print(failure_line(found.name, total, found.failures, found.statuses), file=sys.stderr)
        return 1
    return 0


def main(sweep: Sweep, argv: list[str] | None = None) -> int:
    """`python sweeps/NAME.py [flags]`: run `sweep` itself, under the command line's error contract
    (one line, exit 2), exactly as `abacus-ray sweep NAME [flags]` runs it."""
    return guarded("sweep", lambda: run(sweep, sys.argv[1:] if argv is None else argv))
