"""`abacus-ray reproduce [--storage DIR] [--only NAME ...] [--dry-run]`: the paper at CPU scale.

Every figure and table sweep of the paper (Figs. 3-21, Tables 1-2), each at its `tiny` settings
(`abacus_ray/figures/NAME.py`), one after another on one embedded local Ray: trained through Ray
Tune and Ray Train, evaluated through Ray Data into Parquet under `--storage`, drawn as dashboards.
It ends with the table `abacus-ray summary STORAGE` prints: one row per sweep, its figure's claim
and the verdict its results give. Rerunning the same command resumes: every sweep keeps its finished
trials and evaluated cells, so only what is missing runs. A sweep that fails does not stop the
others; the exit status is then 1. The search beyond the paper (`extrapolation_10x`) is not part of
it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

from abacus_ray import figures, storage
from abacus_ray.api.sweeps import expand, load_sweep, search_of
from abacus_ray.cli import CLIError, error_text
from abacus_ray.cli.sweep import parse, run
from abacus_ray.config import ExperimentConfig

INTERRUPTED = 130  # a command's status after Ctrl-C (`cli.guarded`)
SCALE = "tiny"  # the preset every sweep runs at: CPU cores, minutes per model
DEFAULT_STORAGE = "results/reproduce"


def paper_sweeps() -> tuple[str, ...]:
    """The paper's figure and table sweeps in the paper's order (fig3 ... fig21, table1, table2)."""
    found = [n for n in figures.names() if re.fullmatch(r"(fig|table)\d+_\w+", n)]
    return tuple(
        sorted(found, key=lambda n: (n.startswith("table"), int(re.findall(r"\d+", n)[0])))
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "reproduce",
        help="every figure and table sweep at CPU scale on an embedded local Ray, then verdicts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--storage", default=DEFAULT_STORAGE,
                   help="the storage root, one sweep directory in it each: a path or an "
                        "object-store URI, as for sweep --storage (default: %(default)s)")
    p.add_argument("--only", action="append", default=None, metavar="NAME",
                   help="run only these sweeps, repeatable or a comma list (default: every "
                        f"figure and table sweep, all {len(paper_sweeps())})")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for every trial of every sweep, repeatable")
    p.add_argument("--seeds", type=int, default=None, metavar="N",
                   help="training seeds per configuration in every sweep; at 2 or more a "
                        "verdict needs the seed spread to separate too, and the table gives each "
                        "seed's verdict (default: each figure's tiny scale, one)")
    p.add_argument("--num-cpus", type=int, default=None,
                   help="CPUs for the embedded local Ray (default: all of this machine's)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the price line and the sweeps, their trials and what they cost "
                        "on CPUs; start nothing")
    p.set_defaults(func=handler)


def selected(only: list[str] | None) -> tuple[str, ...]:
    """The sweeps `--only` names, in the paper's order (all of them without it)."""
    names = paper_sweeps()
    if not only:
        return names
    asked = [n.strip() for value in only for n in value.split(",") if n.strip()]
    unknown = [n for n in asked if n not in names]
    if unknown:
        raise CLIError(
            f"--only: {unknown[0]!r} is not a paper sweep; choose from {', '.join(names)}"
        )
    return tuple(n for n in names if n in asked)


def sweep_flags(args: argparse.Namespace) -> list[str]:
    """The flags every sweep runs with, but `--storage`."""
    flags = ["--preset", SCALE]
    for override in args.overrides:
        flags += ["--set", override]
    if args.seeds is not None:
        flags += ["--seeds", str(args.seeds)]
    if args.num_cpus is not None:
        flags += ["--num-cpus", str(args.num_cpus)]
    return flags


def checked(names: tuple[str, ...], flags: list[str]) -> list[list[ExperimentConfig]] | int:
    """Every sweep's flags parsed and its trials expanded before Ray starts (a bad `--set` is one
    line naming the sweep): each sweep's trials' configs, or argparse's exit status when it
    refused."""
    configs = []
    for name in names:
        sweep = load_sweep(name)
        parsed = parse(sweep, flags)
        if isinstance(parsed, int):
            return parsed
        options, _ = parsed
        try:
            configs.append([t.config for t in expand(sweep, options, search_of(sweep, options))])
        except ValueError as e:
            raise CLIError(f"{name}: {error_text(e)}") from None
    return configs


def handler(args: argparse.Namespace) -> int:
    from abacus_ray.plan import sweeps_price_words  # torch-free, but only once the command runs

    names = selected(args.only)
    configs = checked(names, sweep_flags(args))
    if isinstance(configs, int):
        return configs
    root = storage.probe(args.storage, "--storage")  # resolved once, before Ray starts
    # every sweep makes its own directory the working directory: a relative path would move
    flags = [*sweep_flags(args), "--storage", root.uri if root.local else args.storage]
    cores = args.num_cpus or os.cpu_count() or 1
    print(f"reproduce: {len(names)} sweeps, {sum(map(len, configs))} trials at CPU scale under "
          f"{root}; {sweeps_price_words(configs, cores)}", flush=True)
    if args.dry_run:
        print("\n".join(names))
        return 0
    start, failed, here = time.monotonic(), [], os.getcwd()
    for i, name in enumerate(names, 1):
        print(f"reproduce: [{i}/{len(names)}] {name}", flush=True)
        began = time.monotonic()
        try:
            status = run(load_sweep(name), flags)
        except (ValueError, OSError) as e:  # one sweep's failure does not stop the others
            print(f"reproduce: {name}: error: {error_text(e)}", file=sys.stderr)
            status = 2
        except Exception as e:  # noqa: BLE001 - nor does a fault of ours: named, then the next
            print(f"reproduce: {name}: failed: {type(e).__name__}: {error_text(e)}",
                  file=sys.stderr)
            status = 1
        finally:
            os.chdir(here)  # the sweep made its own directory the working directory
        if status:
            failed.append(name)
        print(f"reproduce: {name} ended with status {status} after "
              f"{(time.monotonic() - began) / 60:.1f} min", flush=True)
        if status == INTERRUPTED:  # Ctrl-C: the whole reproduction stops, resumable
            print("reproduce: interrupted; rerun the same command to resume", file=sys.stderr)
            return INTERRUPTED
    print(verdicts(root))
    print(f"reproduce: {len(names)} sweeps in {(time.monotonic() - start) / 60:.1f} min"
          + (f"; failed: {', '.join(failed)} (rerun the same command to resume)" if failed else ""))
    return 1 if failed else 0


def verdicts(root: storage.Location) -> str:
    """The storage root's table of verdicts (as `abacus-ray summary` prints it) and its
    dashboard's front page, rebuilt over every sweep."""
    from abacus_ray.api.verdicts import claim_for, claims_table, read_results
    from abacus_ray.cli.dashboard import build_whole, default_out

    _, per_dir = read_results(root)
    site = build_whole(root, default_out(root), claim_for)
    return f"{claims_table(per_dir)}\n\nreproduce: dashboard {site}"
