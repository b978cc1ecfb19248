"""The main job: Tune sweep of Train trials -> Ray Data grid evaluation -> Parquet -> dashboards.

Layout under `{storage}/{sweep}/`: `sweep.json` (the expanded trials; a rerun must match it),
`tune/` (Tune's experiment state, what `Tuner.restore` reads), `train/` (one Ray Train run per trial,
holding its checkpoints), `results/` (the Parquet dataset) and `dashboard/`.
Rerunning the same command resumes: finished trials are kept, unfinished ones continue from their
latest checkpoint, and only missing cells are evaluated.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

from ray import tune

from abacus_ray.cluster import runtime
from abacus_ray.cluster.grid_eval import Source, evaluate_on_ray
from abacus_ray.cluster.sweep import swept_keys, trial_name
from abacus_ray.cluster.trial import run_trial, trial_config
from abacus_ray.config import preset
from abacus_ray.evaluation.grids import resolve_grid_names
from abacus_ray.training.checkpoint import latest_checkpoint

DRIVER_CPU = 0.01  # a trial's driver must not hold a whole CPU, or 2 trials on 2 cores starve their workers


def max_concurrency(trials: list[dict[str, Any]], preset_name: str) -> int:
    """How many trials fit the cluster at once, from their workers' CPU and GPU needs."""
    cpus, gpus = runtime.cluster_cpus_gpus()
    cl = preset(preset_name, trials[0]).cluster
    fit = math.floor(cpus / (cl.workers * cl.cpus_per_worker) + 1e-9)
    if cl.use_gpu:
        fit = min(fit, math.floor(gpus / (cl.workers * cl.gpus_per_worker) + 1e-9))
    if fit < 1:
        raise ValueError(f"cluster: one trial needs {cl.workers} workers x {cl.cpus_per_worker} CPU"
                         f"{' + GPU' if cl.use_gpu else ''}, but the cluster has {cpus:g} CPUs and {gpus:g} GPUs")
    return min(fit, len(trials))


def _check_same_sweep(root: Path, spec: dict[str, Any]) -> None:
    path = root / "sweep.json"
    if path.exists():
        old = json.loads(path.read_text())
        if old != spec:
            raise ValueError(f"--storage: {root} holds a different sweep (other trials or preset); "
                             "use another --storage or delete that directory")
    else:
        root.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(spec, indent=2, sort_keys=True))
        tmp.replace(path)


def train_all(name: str, preset_name: str, trials: list[dict[str, Any]], root: Path) -> list[Source]:
    """Fit (or resume) every trial through Tune; returns the final checkpoints of finished trials."""
    keys = swept_keys(trials)
    configs = [trial_config(preset_name, t, f"{name}/{trial_name(t, keys)}") for t in trials]
    _check_same_sweep(root, {"preset": preset_name, "trials": configs})
    cl = preset(preset_name, trials[0]).cluster
    # A TorchTrainer trial's driver only waits on its workers; a `function` trial is the worker.
    holds = {"cpu": DRIVER_CPU} if cl.trainer == "torch" else {"cpu": cl.cpus_per_worker,
                                                              "gpu": cl.gpus_per_worker if cl.use_gpu else 0}
    trainable = tune.with_resources(tune.with_parameters(run_trial, storage=str(root / "train")), holds)
    exp = root / "tune"
    if tune.Tuner.can_restore(str(exp)):
        print(f"{name}: resuming {exp}", file=sys.stderr)
        tuner = tune.Tuner.restore(str(exp), trainable, resume_errored=True)  # RAY: resume the sweep
    else:
        tuner = tune.Tuner(  # RAY: one trial per configuration
            trainable,
            param_space={"trial": tune.grid_search(configs)},
            tune_config=tune.TuneConfig(max_concurrent_trials=max_concurrency(trials, preset_name)),
            run_config=tune.RunConfig(name="tune", storage_path=str(root), verbose=1),
        )
    grid = tuner.fit()
    sources, failed = [], []
    for result in grid:
        run_name = result.config["trial"]["run_name"]
        metrics = result.metrics or {}
        trial_id = metrics.get("trial_id")
        path = metrics.get("checkpoint_path")  # the TorchTrainer's last reported checkpoint
        if path is None and result.checkpoint is not None:  # `function` trials: Tune's own checkpoint
            path = result.checkpoint.path
        if path is None and trial_id:  # fall back to the Train run's newest checkpoint on disk
            found = latest_checkpoint(root / "train" / f"train-{trial_id}")
            path = str(found) if found else None
        # An interrupted sweep returns running trials too: only a trial whose last report says
        # `final` is done; evaluating a half-trained checkpoint would mix it into the results.
        if result.error is not None or path is None or not metrics.get("final"):
            failed.append(run_name)
            continue
        sources.append(Source(path, run_id=run_name, trial_id=trial_id))
    if failed:
        print(f"{name}: {len(failed)} trial(s) did not finish: {', '.join(failed)}", file=sys.stderr)
    return sources


def run_sweep(name: str, preset_name: str, trials: list[dict[str, Any]], grids: tuple[str, ...], *, storage: Path,
              address: str | None = None, evaluate: bool = True, dashboards: bool = True,
              num_cpus: int | None = None, eval_recurrences: tuple[int, ...] = ()) -> Path:
    """Train, evaluate and visualise one figure's sweep; returns its directory."""
    root = storage.resolve() / name
    grid_objs = resolve_grid_names(grids)  # fail on a bad grid name before training anything
    runtime.init(address, num_cpus=num_cpus)
    runtime.quiet_data_progress()
    sources = train_all(name, preset_name, trials, root)
    if evaluate and sources:
        eval_cfg = preset(preset_name, trials[0]).eval
        for r in eval_recurrences or (None,):
            report = evaluate_on_ray(sources, grid_objs, dataclasses.replace(eval_cfg, recurrences=r), root / "results")
            print(f"{name}: evaluated {report.cells} cells ({report.skipped} already present) on "
                  f"{len(report.workers)} actor(s) in {report.seconds:.1f}s", file=sys.stderr)
    if dashboards and (root / "results").exists():
        try:
            from dashboards.build import build_site
        except ImportError:
            build_site = None
        if build_site is not None:
            index = build_site(root / "results", root / "dashboard")
            print(f"{name}: dashboard {index}", file=sys.stderr)
    return root
