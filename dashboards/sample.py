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
import hashlib
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from abacus_ray import storage
from abacus_ray.config import preset
from abacus_ray.config.evaluation import EvalConfig
from abacus_ray.evaluation.grids import parse_cells, parse_diagonal
from abacus_ray.evaluation.regions import region_of
from abacus_ray.evaluation.results import config_columns, write_cells
from abacus_ray.evaluation.runner import evaluate
from abacus_ray.sweep_dir import SweepDir
from abacus_ray.training.loop import train

SQUARE, DIAGONAL = "1-6x1-6", "7-9"


def make_sample(
    root: str | Path,
    *,
    steps: int = 20,
    per_cell: int = 8,
    sweep: str = "sample",
    run_names: Sequence[str] = ("seed=0", "seed=1"),
    second_sweep: str | None = None,
) -> Path:
    """Train `len(run_names)` tiny models (seeds 0, 1, ...) and evaluate them
    under `root/<sweep>/results`.

    Returns `root` (a storage root: one sweep directory per sweep). Rerunning skips cells already
    scored.
    """
    if steps < 1:
        raise ValueError(f"steps: must be >= 1, got {steps}")
    if not run_names:
        raise ValueError("run_names: give at least one run name")
    root = Path(root)
    grids = [parse_cells(SQUARE), parse_diagonal(DIAGONAL)]
    eval_cfg = EvalConfig(per_cell=per_cell, seed=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: a second thread only adds contention on a shared CPU
    try:
        checkpoints = []
        for seed, run in enumerate(run_names):
            cfg = preset(
                "tiny",
                [
                    f"seed={seed}",
                    f"train.max_steps={steps}",
                    "train.report_every_s=3600",
                    "train.checkpoint_every_min=600",
                    f"name={sweep}/{run}",
                ],
            )
            result = train(cfg, "cpu", checkpoint_dir=root / sweep / SweepDir.TRAIN / f"run{seed}")
            checkpoints.append(storage.on_disk(Path(result.checkpoint)))
            results = storage.on_disk(root / sweep / SweepDir.RESULTS)
            evaluate([checkpoints[-1]], grids, eval_cfg, results,
                     device="cpu", progress=False, run_id=f"{sweep}/{run}")
        if second_sweep is not None:
            evaluate([checkpoints[0]], [parse_cells("1-3x1-3")], eval_cfg,
                     storage.on_disk(root / "second" / SweepDir.RESULTS), device="cpu",
                     progress=False,
                     run_id=f"{second_sweep}/{run_names[0]}")
    finally:
        torch.set_num_threads(threads)
    return root


def synthetic_results(
    out_dir: str | Path,
    models: Sequence[tuple[str, Sequence[str]]],
    pairs: Sequence[tuple[int, int]],
    *,
    per_cell: int = 100,
    task: str = "add",
    seed: int = 0,
    recurrences: int | None = None,
) -> Path:
    """Write cell rows of made-up accuracies (no model is trained): for size and layout checks only.

    models: (run_id, config overrides on the tiny preset) per model. Accuracy falls off with the
    longer operand beyond the training length; counts are binomial draws, so intervals are real.
    recurrences: the test-time depth the rows claim (default: the model's own).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for run_id, overrides in models:
        cfg = preset("tiny", list(overrides))
        model_id = hashlib.sha256(f"{run_id}|{overrides}".encode()).hexdigest()
        n_train = cfg.task.train_max_len
        reach = n_train * (1 + float(rng.uniform(0.5, 3.0)))
        for i, j in pairs:
            p = 1 / (1 + math.exp((max(i, j) - reach) / 2))
            n = per_cell
            c = int(rng.binomial(n, p))
            rows.append(
                {
                    "model_id": model_id,
                    "run_id": run_id,
                    "checkpoint": None,
                    "task": task,
                    "i": i,
                    "j": j,
                    "region": region_of(task, i, j, n_train, cfg.task.train_max_array),
                    "n_train": n_train,
                    "n": n,
                    "n_correct": c,
                    "accuracy": c / n,
                    "n_first_correct": min(n, c + (n - c) // 2),
                    "per_cell": per_cell,
                    "eval_seed": 0,
                    "engine": "teacher",
                    "recurrences": recurrences or cfg.model.test_recurrences,
                    "require_eos": task != "sort",
                    "scoring": "exact",
                    "precision": "fp32",
                    "seconds": 0.01,
                    "device": "cpu",
                    "evaluated_at": "2026-01-01T00:00:00+00:00",
                    **config_columns(cfg),
                }
            )
    write_cells(storage.on_disk(Path(out_dir)), rows)
    return Path(out_dir)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m dashboards.sample", description=__doc__.splitlines()[0]
    )
    p.add_argument("out", help="storage root to create")
    p.add_argument("--steps", type=int, default=20, help="training steps per model (default 20)")
    args = p.parse_args(argv)
    print(make_sample(args.out, steps=args.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
