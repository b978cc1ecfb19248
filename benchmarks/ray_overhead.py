"""What Ray costs: a Tune + Train trial vs the bare loop for the same steps, and Ray Data
evaluation with 1 vs 2 actors. CPU, tiny preset, measured side by side in one run.

    python benchmarks/ray_overhead.py [--trial-seconds 60] [--cells 1-16x1-16] [--per-cell 50]

Both training runs use one thread (a 1-CPU Ray Train worker gets OMP_NUM_THREADS=1), the same
config and the same number of steps; the Ray time is the Tuner's wall time (trial driver, Train
controller, worker start-up, reports and checkpoint uploads), Ray start-up excluded. The trial runs
once as a `TorchTrainer` (`cluster.trainer=torch`, the default) and once with the loop inside the
Tune trial process (`cluster.trainer=function`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from abacus_ray.config import preset  # noqa: E402
from abacus_ray.training.loop import train  # noqa: E402


def bare(cfg, out: Path) -> tuple[float, str]:
    t = time.perf_counter()
    result = train(cfg, "cpu", checkpoint_dir=out)
    return time.perf_counter() - t, result.checkpoint


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trial-seconds", type=float, default=60.0, help="target length of one training run")
    p.add_argument("--cells", default="1-16x1-16", help="cells for the evaluation comparison")
    p.add_argument("--per-cell", type=int, default=50, help="problems per cell")
    args = p.parse_args()
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="ray-overhead-"))

    # Calibrate the steps that take ~trial-seconds bare: two probes separate set-up from per-step time.
    t_short, _ = bare(preset("tiny", {"train.max_steps": 40, "train.budget_hours": 100.0}), tmp / "probe1")
    t_long, _ = bare(preset("tiny", {"train.max_steps": 160, "train.budget_hours": 100.0}), tmp / "probe2")
    per_step = max((t_long - t_short) / 120, 1e-4)
    steps = max(60, int((args.trial_seconds - (t_short - 40 * per_step)) / per_step))
    cfg_over = {"train.max_steps": steps, "train.budget_hours": 100.0, "train.checkpoint_every_min": 0.5}
    t_bare, ckpt = bare(preset("tiny", cfg_over), tmp / "bare")

    from ray import tune

    from abacus_ray.cluster import runtime
    from abacus_ray.cluster.driver import trial_resources
    from abacus_ray.cluster.trial import run_trial
    from abacus_ray.sweep import single

    runtime.init(num_cpus=2)
    runtime.quiet_data_progress()
    t_ray = {}
    for trainer in ("torch", "function"):
        (trial,) = single(trainer, "tiny", cfg_over | {"cluster.trainer": trainer})
        trainable = tune.with_resources(
            tune.with_parameters(run_trial, configs={trial.name: trial.config}, storage=str(tmp / f"train-{trainer}")),
            trial_resources(trial.config))
        tuner = tune.Tuner(trainable, param_space={"run": trial.name},
                           run_config=tune.RunConfig(name=f"tune-{trainer}", storage_path=str(tmp), verbose=0))
        t = time.perf_counter()
        grid = tuner.fit()
        t_ray[trainer] = time.perf_counter() - t
        assert grid[0].error is None, grid[0].error

    from abacus_ray.cluster.grid_eval import evaluate_on_ray
    from abacus_ray.config.evaluation import EvalConfig
    from abacus_ray.evaluation.grids import parse_cells
    from abacus_ray.evaluation.work import Source, work_items

    grid_cells = [parse_cells(args.cells)]
    eval_cfg = EvalConfig(per_cell=args.per_cell)
    times = {}
    for actors in (1, 2):
        work = work_items([Source(ckpt)], grid_cells, eval_cfg, tmp / f"eval{actors}")
        r = evaluate_on_ray(work, eval_cfg, tmp / f"eval{actors}", cpu_actors=actors, gpu_actors=0, progress=False)
        times[actors] = r.seconds
    runtime.shutdown()

    cells = len(grid_cells[0])
    print(f"machine: {os.cpu_count()} CPUs, torch {torch.__version__}, 1 thread per training process")
    print(f"training, {steps} steps of the tiny preset (micro-batch {preset('tiny').train.micro_batch}):")
    print(f"  bare loop             {t_bare:7.1f} s")
    for trainer, label in (("torch", "Tune + Train trial"), ("function", "Tune function trial")):
        overhead = 100 * (t_ray[trainer] / t_bare - 1)
        print(f"  {label:<21} {t_ray[trainer]:7.1f} s   overhead {overhead:5.1f} %  (cluster.trainer={trainer}; "
              "goal <= 10 %)")
    print(f"Ray Data evaluation, {cells} cells x {args.per_cell} problems (teacher-forced):")
    print(f"  1 actor               {times[1]:7.1f} s")
    print(f"  2 actors              {times[2]:7.1f} s   speed-up {times[1] / times[2]:4.2f}x  (goal >= 1.6x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
