"""`abacus-ray eval-all RESULTS [--grid G]`: every trained model under
RESULTS, scored through Ray Data.

    abacus-ray eval-all RESULTS [--grid paper-100plus] [--out DIR] [--include STATUS,...]

RESULTS is a sweep root, a storage root holding several sweeps (a sweep's `--storage`, a bucket
prefix), a sweep's results directory, or a directory of `abacus-ray train --out` runs, as for
`summary` and `dashboard` (`evaluation.places`); nothing above RESULTS is searched but a results
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
import dataclasses
import sys

import pyarrow as pa

from abacus_ray import storage, trial_status
from abacus_ray.api.checks import check_cluster, check_num_cpus, join_cluster, leave_working_dir
from abacus_ray.config import EvalConfig
from abacus_ray.config.dicts import with_overrides
from abacus_ray.evaluation.grids import resolve_grid_names
from abacus_ray.evaluation.places import evaluation_places
from abacus_ray.evaluation.results import done_keys
from abacus_ray.sweep_dir import SweepDir
from abacus_ray.text import one_line

DEFAULT_GRIDS = ("paper-100plus",)
MAX_RECORD_BYTES = 16 << 20  # a trial record: about 100 bytes a trial, at most `sweep.MAX_TRIALS`


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


def find_models(root: storage.Location) -> list:
    """The latest checkpoint of `root` if it is a training run, else of each run directory directly
    in it (sorted). Not recursive: a link back up cannot loop. A checkpoint itself is refused: its
    results would go inside it."""
    from abacus_ray.model.checkpoint import META_FILE, latest_checkpoint  # heavy: torch

    if not storage.is_dir(root):
        return []
    if storage.is_file(root / META_FILE):
        raise ValueError(f"RESULTS: {root} is a checkpoint; give its run directory "
                         f"({root.parent}) or score it alone with `abacus-ray eval`")
    own = latest_checkpoint(root)
    if own is not None:
        return [own]
    found = [latest_checkpoint(c) for c in storage.listdir(root) if not c.name.startswith(".")]
    return [p for p in found if p is not None]


def sweep_models(root: storage.Location, include: frozenset[str]) -> list:
    """The checkpoints a sweep's trial record lists for the statuses in `include` (finished: what
    the sweep itself scored). A sweep without its record (its trials never all ended) is refused."""
    path = SweepDir.of(root).trials
    info = storage.file_info(path)
    if not storage.is_file(path):
        raise FileNotFoundError(f"{path}: no trial record: a sweep writes it when its trials "
                                "end; rerun the sweep's command to finish it, then eval-all")
    if info.size > MAX_RECORD_BYTES:
        raise ValueError(f"{path}: {info.size} bytes is too large for a trial record "
                         f"(at most {MAX_RECORD_BYTES})")
    try:
        record = storage.read_parquet(path)
    except (OSError, ValueError, pa.ArrowException) as e:
        raise ValueError(f"{path}: not a trial record ({one_line(str(e), 100)})") from None
    return [root / rel for rel in trial_status.checkpoints_to_score(record, include, str(path))]


def places_of(
    args: argparse.Namespace, results: storage.Location
) -> list[tuple[list, storage.Location]]:
    """(models, where their results go) per place under RESULTS that holds models; each results
    directory probed for writing, naming `--out` only when it was given."""
    include = trial_status.parse_include(args.include)
    places = evaluation_places(results)
    if args.out:
        out = storage.resolve(args.out, flag="--out")  # probed below, as every place is
        places = [dataclasses.replace(p, results=out) for p in places]
    found, sweeps = [], any(p.sweep for p in places)
    for place in places:
        try:
            models = (sweep_models(place.models, include) if place.sweep
                      else find_models(place.models))
        except (OSError, ValueError) as e:
            if len(places) == 1:  # the one place asked for: its fault is the command's
                raise
            # one sweep of a storage root without (or with a damaged) trial record: the rest are
            # scored
            print(f"eval-all: skipped {place.models}: {one_line(str(e))}", file=sys.stderr)
            continue
        if models:
            found.append((models, place.results))
    if not found:
        hint = " (finished trials only; --include adds others)"
        hint = "" if args.include or not sweeps else hint
        raise ValueError(f"RESULTS: no checkpoints to score under {args.results}{hint}")
    flag = "--out" if args.out else "RESULTS"
    return [(models, storage.check_location(out, flag)) for models, out in found]


def checked_models(models: list, out: storage.Location) -> list:
    """Every checkpoint loaded once, weights-only and hash-checked (a foreign, truncated or
    wrong-architecture file is refused naming it, not inside an evaluator actor), and each model
    kept once by its `model_id`: copies of one run are scored once, under the first path."""
    from abacus_ray.model.checkpoint import load_checkpoint  # heavy: torch, not at --help

    by_id: dict[str, object] = {}
    for path in models:  # costs one load per model (seconds), small beside scoring it
        by_id.setdefault(load_checkpoint(path, map_location="cpu").model_id, path)
    if len(by_id) < len(models):
        print(f"eval-all: {len(models) - len(by_id)} checkpoint(s) for {out} are copies of "
              "another; each model is scored once", file=sys.stderr)
    return list(by_id.values())


def handler(args: argparse.Namespace) -> int:
    """Everything is checked before Ray starts: flags, grids, every checkpoint (`checked_models`),
    and the work planned (which checks every cell against its model's Abacus table)."""
    # heavy: torch, not at `abacus-ray --help`
    from abacus_ray.evaluation.work import Source, work_items

    grids = resolve_grid_names(tuple(args.grids or DEFAULT_GRIDS))
    trial_status.parse_include(args.include)  # a bad status in one line, before any place is read
    overrides = {
        k: v for k, v in (("per_cell", args.per_cell), ("seed", args.seed)) if v is not None
    }
    eval_cfg = with_overrides(EvalConfig(), overrides)
    check_num_cpus(args.num_cpus)
    check_cluster(args.address)  # an unreachable head or no token: one line, in seconds
    # a bad URI in one line, in seconds
    results = storage.probe(args.results, "RESULTS", write=False)
    jobs = []
    for models, out in places_of(args, results):
        # a local one by its real path (links followed), as its rows will name it
        models = [storage.on_disk(m.as_path().resolve()) if m.local else m for m in models]
        # a foreign or unreadable results directory is refused here, not after the cluster starts
        done_keys(out)
        models = checked_models(models, out)
        jobs.append(
            (len(models), out, work_items([Source(str(m)) for m in models], grids, eval_cfg, out))
        )

    from abacus_ray.cluster import runtime  # heavy: Ray, only once everything above is checked
    from abacus_ray.cluster.grid_eval import evaluate_on_ray  # Ray, as above
    from abacus_ray.cluster.shared_dir import check_every_node_sees  # Ray, as above

    # nothing below depends on the job's working directory
    leave_working_dir(storage.driver_dir(jobs[0][1], "."))
    join_cluster(args.address, num_cpus=args.num_cpus)
    runtime.quiet_data_progress()
    # evaluators on other nodes read the checkpoints: they must see this directory
    if results.local:
        check_every_node_sees(results.as_path(), "RESULTS")
    for n_models, out, work in jobs:
        report = evaluate_on_ray(work, eval_cfg, out)
        print(
            f"eval-all: {n_models} model(s), {report.cells} cells evaluated, {report.skipped} "
            f"already present, {report.seconds:.1f}s -> {out}",
            file=sys.stdout,
        )
    return 0
