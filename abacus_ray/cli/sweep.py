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
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from abacus_ray import figures, storage
from abacus_ray.cli import (
    ArgumentParser,
    add_plugin_flag,
    check_cluster,
    check_num_cpus,
    guarded,
    join_cluster,
    leave_working_dir,
    one_line,
    parse_args,
    plugin_overrides,
    shorten,
)
from abacus_ray.config import preset
from abacus_ray.config.dicts import flatten, parse_set
from abacus_ray.evaluation.grids import Grid, resolve_grid_names
from abacus_ray.sweep import Search, Sweep, Trial, best_point
from abacus_ray.sweep_dir import SweepDir
from abacus_ray.training.budget import budget_terms


def available() -> list[str]:
    """The sweep names `abacus-ray sweep NAME` takes: every figure, and the
    sweep files in ./sweeps."""
    own = Path.cwd() / "sweeps"
    files = (
        {p.stem for p in own.glob("*.py") if not p.name.startswith("_")} if own.is_dir() else set()
    )
    return sorted(set(figures.names()) | files)


def _names_a_file(name: str) -> bool:
    return name.endswith(".py") or "/" in name or storage.is_uri(name)


def load_sweep(name: str) -> Sweep:
    """The sweep `name` names: a figure (`fig10_k`, from `abacus_ray.figures`), or a sweep file, a
    Python file declaring `SWEEP = Sweep(...)`: a path or file:// URI, or NAME.py in
    ./sweeps (the user's own)."""
    sweep = None if _names_a_file(name) else figures.figure(name)
    if sweep is not None:
        return sweep
    if _names_a_file(name) or Path(name).exists():
        path = storage.local_path(name, "NAME", "a sweep file")
    else:
        path = Path.cwd() / "sweeps" / f"{name}.py"
        if not path.is_file():
            raise ValueError(f"NAME: no sweep named {name!r}; choose one of "
                             f"{', '.join(available())} or give the path of a sweep file")
    if not path.is_file():
        raise storage.not_a_file(path, "no such sweep file", "a sweep file")
    storage.check_regular_file(storage.resolve(str(path)), storage.MAX_TEXT_BYTES)  # kilobytes
    if path.suffix != ".py":
        raise ValueError(f"NAME: {path} is not a sweep file (a Python file declaring SWEEP = "
                         "Sweep(...), e.g. sweeps/fig10_k.py)")
    module = _run_sweep_file(path)
    sweep = getattr(module, "SWEEP", None)
    if not isinstance(sweep, Sweep):
        raise ValueError(f"{path}: declares no SWEEP = Sweep(...)")
    _SWEEP_FILES.append(module)
    return sweep


_SWEEP_FILES: list[object] = []  # the sweep files this process ran, for their CLAIMs


def own_claim(sweep: Sweep) -> dict | None:
    """The claim a sweep file declares beside its SWEEP (`CLAIM = Claim(...)`), as `sweep.json`
    records it, for a sweep no figure claims; None where it declares none. The file is one this
    command ran (`abacus-ray sweep PATH`) or the script itself (`python my_sweep.py`)."""
    from abacus_ray.evaluation.claim_record import claim_to_dict
    from abacus_ray.evaluation.claims import Claim

    if figures.claim(sweep.name) is not None:
        return None
    for module in (*_SWEEP_FILES, sys.modules.get("__main__")):
        if module is not None and getattr(module, "SWEEP", None) is sweep:
            claim = getattr(module, "CLAIM", None)
            if claim is None:
                return None
            if not isinstance(claim, Claim):
                raise ValueError(f"{sweep.name}: CLAIM is not a Claim(...) "
                                 "(abacus_ray.evaluation.claims)")
            return claim_to_dict(claim)
    return None


def _run_sweep_file(path: Path) -> object:
    """Run a sweep file (it is code, like a Makefile) for its module; one that does not run is one
    line naming the file (and the line of a syntax error), not a traceback."""
    spec = importlib.util.spec_from_file_location(f"abacus_ray_sweep_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise ValueError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # whatever a sweep file raises is the file's fault: one line
        raise ValueError(
            f"{path}: does not run: {type(e).__name__}: {one_line(str(e), 300)}"
        ) from None
    except SystemExit as e:  # sys.exit() while it was read: it declared no sweep, whatever code
        raise ValueError(f"{path}: exited (SystemExit({e.code!r})) while it was read, before it "
                         "declared its SWEEP; a sweep file runs its sweep only under "
                         "`if __name__ == \"__main__\":`") from None
    return module


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
        help="a figure's sweep (e.g. fig10_k) or the path of a sweep file"
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
                   help="tiny: CPU-minutes per model on a laptop; paper: the paper's "
                        "setting (GPU cluster)")
    p.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="training seeds per configuration (default: the figure's)",
    )
    p.add_argument("--budget-hours", type=float, default=None,
                   help="a wall-clock limit per trial in device-hours: wall hours x devices "
                        "(GPU-hours on GPUs), so 24 on 8 workers stops after 3 wall-hours; the "
                        "paper preset's budget is in A4000-hours of model FLOPs "
                        "(train.budget_a4000_hours), the same samples on any GPU")
    p.add_argument("--storage", default="results",
                   help="where trials, checkpoints and Parquet results go: a directory (one "
                        "machine, or a mount every node sees) or an object store URI, "
                        "s3://BUCKET/PREFIX (AWS credentials from the standard variables or "
                        "~/.aws; an S3-compatible server from AWS_ENDPOINT_URL or "
                        "?endpoint_override=HOST:PORT&scheme=http) or gs://BUCKET/PREFIX; "
                        "probed before Ray starts")
    p.add_argument("--address", default=None,
                   help="Ray cluster address (default: $RAY_ADDRESS, else an embedded "
                        "local Ray on 127.0.0.1)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="extra config override for every trial (repeatable), "
                        "e.g. train.max_steps=100")
    add_plugin_flag(p)
    p.add_argument("--axis", dest="axes", action="append", default=[], metavar="KEY=V1,V2",
                   help="sweep one more config key over a comma list of values (repeatable; the "
                        "cross product with the sweep's own axes is trained; an axis the sweep "
                        "has takes these values instead), e.g. "
                        "--axis model.max_k=4,8 --axis train.lr=1e-3,3e-3")
    p.add_argument(
        "--per-cell",
        type=int,
        default=None,
        help="problems per evaluation cell (default: the preset's)",
    )
    p.add_argument("--grid", dest="grids", action="append", default=None,
                   help="evaluation grid name or spec (repeatable; default: the figure's grids)")
    p.add_argument("--max-trials", type=int, default=None,
                   help="run only the first N trials of the expansion (smoke tests)")
    for flag in sweep.flags:
        p.add_argument(
            flag.name, default=None, help=f"{flag.help} (sets {flag.key}; a comma list sweeps it)"
        )
    if sweep.search is not None or sweep.tiny.search is not None or sweep.paper.search is not None:
        add_search_flags(p)
    p.add_argument("--break-lease", action="store_true",
                   help="take over the sweep directory's lease from a run that is gone (one "
                        "this machine cannot tell is gone: another host's); never needed for "
                        "a run of this host that was killed")
    p.add_argument("--dry-run", action="store_true",
                   help="print the expanded trials (name, swept values, full resolved config) "
                        "as JSON; start nothing")
    p.add_argument("--no-eval", action="store_true", help="train only")
    p.add_argument("--tracking", choices=("mlflow", "wandb", "none"), default="mlflow",
                   help="experiment tracking, one run per trial: mlflow (default; a SQLite store, "
                        f"the sweep's {SweepDir.TRACKING_STORE}: under --storage when it is a "
                        "directory, else on this machine under ~/.abacus-ray/ (the path is "
                        "printed); `mlflow ui --backend-store-uri sqlite:///PATH --host "
                        "127.0.0.1`), wandb (offline), none")
    p.add_argument("--tracking-uri", default=None, metavar="URI",
                   help="an MLflow tracking server (http://HOST:PORT) to log to instead of "
                        "the local SQLite store")
    p.add_argument("--no-dashboard", action="store_true", help="do not build the dashboards")
    p.add_argument(
        "--num-cpus", type=int, default=None, help="CPUs for the embedded local Ray (default: all)"
    )
    return p


def confirmation(sweep: Sweep, args: argparse.Namespace, loc: storage.Location) -> Sweep:
    """`--confirm`: the search's best finished point (highest last validation score) under `loc`
    (the probed `--storage`) as a plain sweep to retrain."""
    path = SweepDir(loc, sweep.name).search
    if not storage.is_file(path):
        raise FileNotFoundError(
            2, f"no finished search of {sweep.name} to confirm (run it first)", str(path)
        )
    return sweep.confirmation(args.preset, best_point(storage.read_parquet(path).to_pylist()))


def search_of(sweep: Sweep, args: argparse.Namespace) -> Search | None:
    """The sweep's search under `--samples` / `--grace-steps` (None: a plain sweep)."""
    search = sweep.search_for(args.preset)
    if search is None:
        return None
    changed = {
        k: v
        for k, v in (("samples", args.samples), ("grace_steps", args.grace_steps))
        if v is not None
    }
    return dataclasses.replace(search, **changed)


def expand(sweep: Sweep, args: argparse.Namespace, search: Search | None = None) -> list[Trial]:
    """The sweep's trials under the parsed flags (validated; no Ray): a search's
    picked points in order."""
    overrides: dict[str, Any] = {**plugin_overrides(args),
                                 **dict(parse_set(s) for s in args.overrides)}
    if args.budget_hours is not None:
        overrides["train.budget_hours"] = args.budget_hours
    if args.per_cell is not None:
        overrides["eval.per_cell"] = args.per_cell
    axes = command_line_axes(args.axes)
    for flag in sweep.flags:
        value = getattr(args, flag.name.lstrip("-").replace("-", "_"))
        if value is not None:
            if flag.key in axes:
                raise ValueError(f"--axis {flag.key}: also given by {flag.name}; give it once")
            axes[flag.key] = [v.strip() for v in value.split(",") if v.strip()]
            if not axes[flag.key]:
                raise ValueError(f"{flag.name}: no value in {value!r}; give one "
                                 "value or a comma list")
    trials = sweep.expand(args.preset, seeds=args.seeds, overrides=overrides, axes=axes,
                          grids=tuple(args.grids) if args.grids else None)
    if not trials:
        raise ValueError(f"--preset: {args.preset} expands to no trials")
    if search is not None:
        trials = search.pick(trials)
    if args.max_trials is not None:
        if args.max_trials < 1:
            raise ValueError(f"--max-trials: must be >= 1, got {args.max_trials}")
        trials = trials[: args.max_trials]
    return trials


def command_line_axes(given: list[str]) -> dict[str, list[str]]:
    """`--axis KEY=V1,V2` items as axes: each key once, known to the config, with at least one
    value. An axis the sweep has already takes these values instead of its own."""
    axes: dict[str, list[str]] = {}
    known = set(flatten(preset("tiny").to_dict()))
    for item in given:
        shown = f"--axis {shorten(item, 80)}"
        key, sep, values = (part.strip() for part in item.partition("="))
        if not sep or not key:
            raise ValueError(f"{shown}: expected KEY=V1,V2, e.g. model.max_k=4,8")
        if key not in known:
            raise ValueError(f"{shown}: {key!r} is not a config key (abacus-ray describe "
                             "lists them)")
        if key in axes:
            raise ValueError(f"{shown}: {key} is given twice; give one comma list")
        axes[key] = [v.strip() for v in values.split(",") if v.strip()]
        if not axes[key]:
            raise ValueError(f"{shown}: no value; give one value or a comma list")
    return axes


def eval_grids(trials: list[Trial]) -> dict[tuple[str, ...], list[Grid]]:
    """Every trial's `eval.grids` (`--grid` values included) resolved, once: a bad name is one line
    before anything runs, and the driver scores on these."""
    return {t.config.eval.grids: resolve_grid_names(t.config.eval.grids) for t in trials}


def check_before_ray(parsed: argparse.Namespace) -> storage.Location:
    """What the real run checks before Ray starts, `--dry-run` included: CPUs, tracking, and
    `--storage` probed (a small write, list and delete), so that a dry run passes only where the run
    could start. The memory check of an embedded Ray's trials is the real run's alone (a dry run on
    a laptop may well describe a cluster's sweep)."""
    check_num_cpus(parsed.num_cpus)
    if parsed.tracking == "wandb" and importlib.util.find_spec("wandb") is None:
        raise ValueError("--tracking wandb: needs the wandb package (pip install wandb)")
    if parsed.tracking_uri is not None and (
        parsed.tracking != "mlflow" or "://" not in parsed.tracking_uri
    ):
        raise ValueError(f"--tracking-uri: {storage.safe_uri(parsed.tracking_uri)!r} is not an "
                         "MLflow server URI (http://HOST:PORT) or --tracking is not mlflow")
    check_cluster(parsed.address)
    return storage.probe(parsed.storage, "--storage")  # one line and exit 2 for bad storage


def dry_run(
    sweep: Sweep, parsed: argparse.Namespace, search: Search | None, trials: list[Trial]
) -> int:
    print(
        json.dumps(
            {
                "sweep": sweep.name,
                "caption": sweep.caption,
                "claim": own_claim(sweep),
                "preset": parsed.preset,
                "eval_recurrences": list(sweep.eval_recurrences_for(parsed.preset)),
                "search": dataclasses.asdict(search) if search else None,
                "trials": [
                    {
                        "name": t.name,
                        "params": t.params,
                        "budget": budget_terms(t.config, t.config.cluster.workers),
                        "config": t.config.to_dict(),
                    }
                    for t in trials
                ],
            },
            indent=2,
        )
    )
    return 0


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
    """Parse the sweep's flags, check everything a run needs (before Ray), then print the dry run or
    train, evaluate and draw the sweep."""
    parsed = parse_args(build_parser(sweep), argv)
    if isinstance(parsed, int):  # --help (0) or a one-line usage error (2)
        return parsed
    loc = None
    if getattr(parsed, "confirm", False):
        loc = check_before_ray(parsed)  # a bad URI in one line, before its search is read
        sweep = confirmation(sweep, parsed, loc)
    search = search_of(sweep, parsed)
    trials = expand(sweep, parsed, search)
    grids = eval_grids(trials)
    loc = loc or check_before_ray(parsed)
    # another sweep in this directory: refused before Ray starts (the driver checks again)
    record = SweepDir.record_of(parsed.preset, [t.config for t in trials])
    SweepDir(loc, sweep.name).check_same(record, write=False)
    if parsed.dry_run:
        return dry_run(sweep, parsed, search, trials)
    # the embedded Ray: trials train here
    if parsed.address is None and not os.environ.get("RAY_ADDRESS"):
        import torch

        # heavy: torch, only for a run that trains here
        from abacus_ray.training.loop import check_fits_here

        gpus = torch.cuda.device_count()  # what the embedded Ray finds, as the driver will decide
        check_fits_here([t.config.replace(cluster=t.config.cluster.resolved(gpus)) for t in trials])
    check_free_space(loc, sweep, parsed.preset, trials)
    # one sweep at a time in this directory: a second is refused before Ray starts
    with storage.lease(SweepDir(loc, sweep.name).root, "--storage",
                       break_lease=parsed.break_lease):
        return run_on_ray(sweep, parsed, search, trials, loc, grids)


def check_free_space(loc: storage.Location, sweep: Sweep, preset_name: str,
                     trials: list[Trial]) -> None:
    """Refuse, before Ray starts, a local `--storage` whose disk has less room than the sweep will
    still write (what `abacus-ray plan` counts, less what its directory already holds): a disk that
    fills mid-sweep costs every trial its last checkpoint. An object store is not measured."""
    here = SweepDir(loc, sweep.name).root
    free = storage.free_bytes(here)
    if free is None:
        return
    from abacus_ray.plan import sweep_bytes

    need = sweep_bytes([t.config for t in trials], sweep.eval_recurrences_for(preset_name))
    need -= storage.tree_bytes(here)
    if free < need:
        raise ValueError(f"--storage: {loc}: {free / 1e6:,.0f} MB free, but this sweep will write "
                         f"about {need / 1e6:,.0f} MB more (its checkpoints and results, as "
                         "`abacus-ray plan` counts them); free some space or give another "
                         "--storage")


def run_on_ray(sweep: Sweep, parsed: argparse.Namespace, search: Search | None, trials: list[Trial],
               loc: storage.Location, grids: dict[tuple[str, ...], list[Grid]]) -> int:
    """Train and evaluate the trials on Ray under `loc` (the probed `--storage`) on `grids`, then
    build the dashboard."""
    # heavy: Ray, only once a sweep really runs
    from abacus_ray.cluster.driver import failure_line, run_sweep
    from abacus_ray.plan import cpu_price_words

    if parsed.address is not None:  # joined before the sweep's directory is made
        join_cluster(parsed.address)
    dirs = SweepDir(loc, sweep.name)
    leave_working_dir(dirs.local)  # the sweep's directory, or this machine's for a bucket
    if parsed.tracking == "mlflow" and not loc.local:
        store = parsed.tracking_uri or dirs.tracking / SweepDir.TRACKING_STORE
        print(f"{sweep.name}: MLflow store {store} (SQLite cannot live in a bucket: it stays on "
              "this machine)", file=sys.stderr)
    found = run_sweep(sweep.name, parsed.preset, trials, storage_root=loc, grids=grids,
                      address=parsed.address, evaluate=not parsed.no_eval, num_cpus=parsed.num_cpus,
                      eval_recurrences=sweep.eval_recurrences_for(parsed.preset),
                      tracking=parsed.tracking, search=search, tracking_uri=parsed.tracking_uri,
                      price=cpu_price_words,  # trials on CPUs: their cost in the first line
                      claim=own_claim(sweep))
    if not parsed.no_dashboard and storage.is_dir(dirs.results):
        from abacus_ray.cli.summary import claim_for  # the figure's claim, for the index's verdict
        from dashboards.build import build_site  # heavy: pandas and plotly, for a finished sweep

        site = build_site(dirs.results, dirs.dashboard, claim_for)
        print(f"{sweep.name}: dashboard {site}", file=sys.stderr)
    print(f"{sweep.name}: results in {dirs.root}")
    if not parsed.no_eval and storage.is_dir(dirs.results):
        from abacus_ray.cli.summary import sweep_conclusion  # pandas, only for a sweep with results

        conclusion = sweep_conclusion(dirs.results)  # the figure's claim, decided by these results
        if conclusion is not None:
            print(conclusion)
    if found.failures:  # the last line: which trials failed and why (the others' results stay)
        print(failure_line(sweep.name, len(trials), found.failures), file=sys.stderr)
        return 1
    return 0


def main(sweep: Sweep, argv: list[str] | None = None) -> int:
    """`python sweeps/NAME.py [flags]`: run `sweep` itself, under the command line's error contract
    (one line, exit 2), exactly as `abacus-ray sweep NAME [flags]` runs it."""
    return guarded("sweep", lambda: run(sweep, sys.argv[1:] if argv is None else argv))
