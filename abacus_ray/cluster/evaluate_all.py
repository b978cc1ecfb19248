"""Evaluate every trained model under a results root through Ray Data (`make eval-100plus`).

    python -m abacus_ray.cluster.evaluate_all RESULTS [--grid diagonal:101-160] [--out DIR]

A model is the latest `step-*` checkpoint of each run directory under RESULTS (a sweep's `train/`
runs, or `abacus-ray train --out` directories). Results go to `RESULTS/results` unless `--out` says
otherwise; only cells whose key is missing are evaluated, so a second run does nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from abacus_ray.training.checkpoint import latest_checkpoint


def find_models(root: Path) -> list[Path]:
    """The latest checkpoint of every run directory below `root` (sorted, deterministic)."""
    if not root.is_dir():
        raise FileNotFoundError(f"RESULTS: {root} is not a directory")
    runs = sorted({p.parent.parent for p in root.rglob("step-*/meta.json") if not p.parent.name.startswith(".")})
    found = [latest_checkpoint(r) for r in runs]
    return [p for p in found if p is not None]


def check_models(models: list[Path], grids) -> None:
    """Load every checkpoint once on the driver (weights-only, hash-checked) before Ray starts.

    A foreign, truncated or wrong-architecture checkpoint is refused with one line naming its file,
    instead of failing inside an evaluator actor after the cluster has started; a model's cells must
    also fit its Abacus table. Costs one load per model (seconds), small beside scoring it.
    """
    from abacus_ray.evaluation.runner import cells_for, check_capacity
    from abacus_ray.training.checkpoint import load_checkpoint

    for path in models:
        ckpt = load_checkpoint(path, map_location="cpu")
        check_capacity(ckpt.config, cells_for(ckpt.config, grids))
        del ckpt


def main(argv: list[str] | None = None) -> int:
    from abacus_ray.cli import ArgumentParser, check_output_dir, error_text, parse_args

    p = ArgumentParser(prog="python -m abacus_ray.cluster.evaluate_all", description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path, help="results root to search for checkpoints")
    p.add_argument("--grid", dest="grids", action="append", default=None,
                   help="grid name or spec (repeatable; default diagonal:101-160, the paper's 100+ set)")
    p.add_argument("--out", type=Path, default=None, help="Parquet results directory (default RESULTS/results)")
    p.add_argument("--per-cell", type=int, default=None, help="problems per cell (default 100, the paper's)")
    p.add_argument("--seed", type=int, default=None, help="evaluation seed (default 0)")
    p.add_argument("--address", default=None, help="Ray address (default: $RAY_ADDRESS, else a local Ray)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs for the embedded local Ray")
    args = parse_args(p, argv)
    if isinstance(args, int):  # --help (0) or a one-line usage error (2)
        return args
    try:
        from abacus_ray.configuration import with_overrides
        from abacus_ray.evaluation.config import EvalConfig
        from abacus_ray.evaluation.grids import resolve_grid_names
        from abacus_ray.evaluation.results import done_keys

        grids = resolve_grid_names(tuple(args.grids or ("diagonal:101-160",)))
        overrides = {k: v for k, v in (("per_cell", args.per_cell), ("seed", args.seed)) if v is not None}
        eval_cfg = with_overrides(EvalConfig(), overrides)
        if args.num_cpus is not None and args.num_cpus < 1:
            raise ValueError(f"--num-cpus: must be >= 1, got {args.num_cpus}")
        models = find_models(args.results)
        if not models:
            raise ValueError(f"RESULTS: no checkpoints under {args.results}")
        out = check_output_dir(args.out or args.results / "results", "--out")
        done_keys(out)  # a foreign or unreadable results directory is refused here, not after training
        check_models(models, grids)

        from abacus_ray.cluster import runtime
        from abacus_ray.cluster.grid_eval import Source, evaluate_on_ray

        runtime.init(args.address, num_cpus=args.num_cpus)
        runtime.quiet_data_progress()
        report = evaluate_on_ray([Source(str(m)) for m in models], grids, eval_cfg, out)
    except (ValueError, OSError) as e:
        print(f"evaluate_all: error: {error_text(e)}", file=sys.stderr)
        return 2
    print(f"evaluate_all: {len(models)} model(s), {report.cells} cells evaluated, {report.skipped} already present, "
          f"{report.seconds:.1f}s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
