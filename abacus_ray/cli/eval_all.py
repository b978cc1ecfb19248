"""`abacus-ray eval-all RESULTS [--grid G]`: every trained model under RESULTS, scored through Ray Data.

    abacus-ray eval-all RESULTS [--grid paper-100plus] [--out DIR] [--per-cell N] [--seed S]

RESULTS is a sweep root, a storage root holding several sweeps (a sweep's `--storage`, a bucket prefix),
a sweep's results directory, or a directory of `abacus-ray train --out` runs, as for `summary` and
`dashboard` (`evaluation.places`). A model is the latest `step-*` checkpoint of each run directory; each
sweep's models are scored into its own `results/` unless `--out` names one directory for all. Only cells
whose key is missing are evaluated, so a second run does nothing. The default grid is the paper's 100+
set (the 101-160 diagonal; `make eval-100plus`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from abacus_ray import storage
from abacus_ray.cli import check_num_cpus, leave_working_dir
from abacus_ray.config import EvalConfig
from abacus_ray.config.dicts import with_overrides
from abacus_ray.evaluation.grids import resolve_grid_names
from abacus_ray.evaluation.places import EvaluationPlace, evaluation_places
from abacus_ray.evaluation.results import done_keys

DEFAULT_GRIDS = ("paper-100plus",)


def register(subparsers) -> None:
    p = subparsers.add_parser("eval-all", help="score every checkpoint under a results root through Ray Data",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", metavar="RESULTS",
                   help="sweep root, storage root or results directory to find checkpoints in: a directory or an "
                        "object-store URI (s3://, gs://)")
    p.add_argument("--grid", dest="grids", action="append", default=None,
                   help=f"grid name or spec (repeatable; default {', '.join(DEFAULT_GRIDS)}: the 101-160 diagonal)")
    p.add_argument("--out", default=None,
                   help="one Parquet results directory or URI for every model (default: each sweep's results/)")
    p.add_argument("--per-cell", type=int, default=None, help="problems per cell (default 100, the paper's)")
    p.add_argument("--seed", type=int, default=None, help="evaluation seed (default 0)")
    p.add_argument("--address", default=None, help="Ray address (default: $RAY_ADDRESS, else a local Ray)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs for the embedded local Ray")
    p.set_defaults(func=handler)


def find_models(root) -> list:
    """The latest checkpoint of every run directory below `root`, a path or a `storage.Location` (sorted,
    deterministic; one recursive listing on an object store)."""
    from abacus_ray.model.checkpoint import latest_checkpoint  # heavy: torch, not at `abacus-ray --help`

    root = storage.resolve(root, flag="RESULTS")
    if not storage.is_dir(root):
        return []
    metas = [m for m in storage.find(root, "meta.json")
             if m.parent.name.startswith("step-") and not m.parent.name.startswith(".")]
    runs = {m.parent.parent.path: m.parent.parent for m in metas}
    found = [latest_checkpoint(runs[k]) for k in sorted(runs)]
    return [p for p in found if p is not None]


def places_of(args: argparse.Namespace, results: storage.Location) -> list[tuple[list, storage.Location]]:
    """(models, where their results go) per place under RESULTS that holds models; `--out` probed once."""
    places = [EvaluationPlace(results, storage.resolve(args.out, flag="--out"))] if args.out else \
        evaluation_places(results)
    found = [(models, place.results) for place in places if (models := find_models(place.models))]
    if not found:
        raise ValueError(f"RESULTS: no checkpoints under {args.results}")
    return [(models, storage.probe(out, "--out")) for models, out in found]


def handler(args: argparse.Namespace) -> int:
    """Everything is checked before Ray starts: flags, grids, every checkpoint loaded once weights-only and
    hash-checked (a foreign, truncated or wrong-architecture file is refused naming it, not inside an
    evaluator actor), and the work planned (which checks every cell against its model's Abacus table)."""
    from abacus_ray.evaluation.work import Source, work_items  # heavy: torch, not at `abacus-ray --help`
    from abacus_ray.model.checkpoint import load_checkpoint  # torch, as above

    grids = resolve_grid_names(tuple(args.grids or DEFAULT_GRIDS))
    overrides = {k: v for k, v in (("per_cell", args.per_cell), ("seed", args.seed)) if v is not None}
    eval_cfg = with_overrides(EvalConfig(), overrides)
    check_num_cpus(args.num_cpus)
    results = storage.probe(args.results, "RESULTS", write=False)  # a bad URI in one line, in seconds
    jobs = []
    for models, out in places_of(args, results):
        models = [m.resolve() if isinstance(m, Path) else m for m in models]
        done_keys(out)  # a foreign or unreadable results directory is refused here, not after the cluster starts
        for path in models:  # costs one load per model (seconds), small beside scoring it
            load_checkpoint(path, map_location="cpu")
        jobs.append((len(models), out, work_items([Source(str(m)) for m in models], grids, eval_cfg, out)))

    from abacus_ray.cluster import runtime  # heavy: Ray, only once everything above is checked
    from abacus_ray.cluster.grid_eval import evaluate_on_ray  # Ray, as above
    from abacus_ray.cluster.shared_dir import check_every_node_sees  # Ray, as above

    leave_working_dir(storage.driver_dir(jobs[0][1], "."))  # nothing below depends on the job's working directory
    runtime.init(args.address, num_cpus=args.num_cpus)
    runtime.quiet_data_progress()
    if results.local:  # evaluators on other nodes read the checkpoints: they must see this directory
        check_every_node_sees(results.as_path(), "RESULTS")
    for n_models, out, work in jobs:
        report = evaluate_on_ray(work, eval_cfg, out)
        print(f"eval-all: {n_models} model(s), {report.cells} cells evaluated, {report.skipped} already present, "
              f"{report.seconds:.1f}s -> {out}", file=sys.stdout)
    return 0
