"""A small but real results tree for tests and demos of the dashboards, made in seconds without Ray.

Two tiny addition models (seeds 0 and 1 of one condition) are trained for a few steps with
`training.loop.train` and scored with `evaluation.runner.evaluate` on the 1..6 square plus the 7..9
diagonal. Run names are given by the caller, so a test can use hostile ones (markup, `<script>`)
and check that the pages show them as text. Optionally the first model is also scored into a
second sweep directory, so the tree has two sweeps as a storage root does.

    python -m dashboards.sample OUT_DIR     # then: abacus-ray dashboard OUT_DIR
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

SQUARE, DIAGONAL = "1-6x1-6", "7-9"


def make_sample(root: str | Path, *, steps: int = 20, per_cell: int = 8, sweep: str = "sample",
                run_names: Sequence[str] = ("seed=0", "seed=1"), second_sweep: str | None = None) -> Path:
    """Train `len(run_names)` tiny models (seeds 0, 1, ...) and evaluate them under `root/<sweep>/results`.

    Returns `root` (a storage root: one sweep directory per sweep). Rerunning skips cells already scored.
    """
    import torch

    from abacus_ray.config import preset
    from abacus_ray.evaluation.config import EvalConfig
    from abacus_ray.evaluation.grids import parse_cells, parse_diagonal
    from abacus_ray.evaluation.runner import evaluate
    from abacus_ray.training.loop import train

    if steps < 1:
        raise ValueError(f"steps: must be >= 1, got {steps}")
    if not run_names:
        raise ValueError("run_names: give at least one run name")
    root = Path(root)
    grids = [parse_cells(SQUARE), parse_diagonal(DIAGONAL)]
    eval_cfg = EvalConfig(per_cell=per_cell, seed=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(min(2, threads))
    try:
        checkpoints = []
        for seed, run in enumerate(run_names):
            cfg = preset("tiny", [f"seed={seed}", f"train.max_steps={steps}", "train.report_every_s=3600",
                                  "train.checkpoint_every_min=600", f"name={sweep}/{run}"])
            result = train(cfg, "cpu", checkpoint_dir=root / sweep / "train" / f"run{seed}")
            checkpoints.append(result.checkpoint)
            evaluate([result.checkpoint], grids, eval_cfg, root / sweep / "results", device="cpu", progress=False,
                     run_id=f"{sweep}/{run}")
        if second_sweep is not None:
            evaluate([checkpoints[0]], [parse_cells("1-3x1-3")], eval_cfg, root / "second" / "results", device="cpu",
                     progress=False, run_id=f"{second_sweep}/{run_names[0]}")
    finally:
        torch.set_num_threads(threads)
    return root


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dashboards.sample", description=__doc__.splitlines()[0])
    p.add_argument("out", help="storage root to create")
    p.add_argument("--steps", type=int, default=20, help="training steps per model (default 20)")
    args = p.parse_args(argv)
    print(make_sample(args.out, steps=args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
