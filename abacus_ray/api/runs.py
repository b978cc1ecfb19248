"""One model trained, one set of checkpoints scored, on this machine, with no Ray: what `abacus-ray
train` and `abacus-ray eval` run, and what `abacus_ray.api.train` / `.evaluate` return.

Every refusal is raised before any training or scoring (a `ValueError`, or an `OSError` naming its
path), naming the option as the command line spells it. Paths and object-store URIs are both
taken: each is resolved and probed once, here.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from abacus_ray import plugins, storage
from abacus_ray.api.checks import check_device, check_readable
from abacus_ray.config import ExperimentConfig
from abacus_ray.config.dicts import check_text

if TYPE_CHECKING:
    import pandas as pd

Report = Callable[[dict], None]  # what a training report (a dict of metrics) is handed to


@dataclass(frozen=True)
class Trained:
    """A finished training run: its final checkpoint (path or URI) and model id; or, where the
    loss or gradient norm stopped being finite, the step it diverged at and the last checkpoint
    written before it (None: none was)."""

    config: ExperimentConfig
    checkpoint: str | None
    model_id: str | None
    diverged_at_step: int | None = None


@dataclass(frozen=True)
class Evaluated:
    """Checkpoints scored into `out`: cells scored and cells already there, per model id."""

    out: str
    evaluated: Mapping[str, int]
    skipped: Mapping[str, int]
    seconds: float

    def cells(self) -> pd.DataFrame:
        """Every cell row under `out`, earlier runs' included (`docs/reference.md`, "Parquet")."""
        from abacus_ray.evaluation.results import read_cells

        return read_cells(storage.resolve(self.out))


class Mirror:
    """An `out` on object storage: each checkpoint the loop saves locally is copied up (the newest
    `KEPT_CHECKPOINTS` are kept there) before the report goes on to `inner`."""

    def __init__(self, inner: Report, loc: storage.Location) -> None:
        self.inner, self.loc = inner, loc

    def copy(self, path) -> None:
        from abacus_ray.model.checkpoint import KEPT_CHECKPOINTS, META_FILE, list_checkpoints

        target = self.loc / Path(path).name
        if not storage.exists(target / META_FILE):
            # a reader lists only checkpoints with meta.json
            storage.upload(Path(path), target, last=META_FILE)
        for old in list_checkpoints(self.loc)[: -KEPT_CHECKPOINTS]:
            storage.delete(old)

    def __call__(self, metrics: dict) -> None:
        if metrics.get("checkpoint"):
            self.copy(metrics["checkpoint"])
        self.inner(metrics)


def train(config: ExperimentConfig | None, out: str, *, resume: bool = False,
          overrides: Sequence[str] | Mapping[str, Any] = (), device: str = "auto",
          threads: int | None = None, report: Report | None = None, break_lease: bool = False,
          announce: Callable[[ExperimentConfig, str, str | None], None] | None = None
          ) -> Trained:
    """Train `config` into `out` (numbered `step-*` checkpoints, the newest two kept), or with
    `resume` continue `out`'s latest checkpoint under its stored config plus `overrides`.

    `report` gets every training report (a dict of metrics); `announce(config, device, resumed)`
    (`resumed`: the checkpoint resumed, or None) is called once everything is checked, just
    before the first step. One run at a time holds `out`."""
    from abacus_ray.model.checkpoint import (  # heavy: torch, only once something trains
        STATE_FILE,
        check_train_state,
        latest_checkpoint,
        load_checkpoint,
    )
    from abacus_ray.training.loop import check_fits, check_resumable
    from abacus_ray.training.threads import set_threads

    loc = storage.probe(out, "--out")  # a directory or an object-store URI, before any training
    latest = latest_checkpoint(loc)
    recorded = None  # the threads a resumed checkpoint was trained with
    if resume:
        if latest is None:
            raise ValueError(f"--resume: no checkpoint under {loc}")
        # every file of the checkpoint is checked before anything trains: weights-only, hash and
        # shapes (`load_checkpoint`), and a training state that holds what resuming reads
        resumed = load_checkpoint(latest)
        check_train_state(resumed.state, latest / STATE_FILE)
        cfg = resumed.config.with_overrides(overrides)
        check_resumable(cfg, resumed.config, str(latest), "--resume")  # a --set it cannot take
        recorded = resumed.meta.get("threads")
        del resumed
    else:
        if latest is not None:
            raise ValueError(f"--out: {loc} already holds checkpoints (latest {latest.name}); "
                             "pass --resume to continue it or choose another directory")
        if config is None:
            raise ValueError("config: give the config to train (or resume=True)")
        cfg = config.with_overrides(overrides)
    device = check_device(device)
    set_threads(threads, recorded=recorded)
    if cfg.cluster.use_gpu is None:  # auto: the config records where the device put the run
        cfg = cfg.replace(cluster=cfg.cluster.resolved(1.0 if device.startswith("cuda") else 0.0))
    check_fits(cfg, device)  # before the first line is printed: a refusal is the only line
    with storage.lease(loc, "--out", break_lease=break_lease):
        if announce is not None:
            announce(cfg, device, str(latest) if resume else None)
        return _train(cfg, loc, device, latest if resume else None, report or (lambda m: None))


def _train(cfg: ExperimentConfig, loc: storage.Location, device: str,
           resume_from: storage.Location | None, report: Report) -> Trained:
    """Train `cfg` into `loc`, whose lease this process holds. On object storage the loop writes
    into a local staging directory and each checkpoint is copied up."""
    from abacus_ray.model.checkpoint import latest_checkpoint
    from abacus_ray.training.loop import train as train_loop

    out = loc.as_path() if loc.local else Path(tempfile.mkdtemp(prefix="abacus-train-"))
    mirror = None if loc.local else Mirror(report, loc)
    result = train_loop(cfg, device, report=mirror or report, checkpoint_dir=out,
                        resume_from=resume_from)
    diverged = result.metrics.get("diverged_at_step")
    if mirror is not None:
        if diverged is None:
            mirror.copy(result.checkpoint)
        storage.delete(storage.on_disk(out), quiet=True)  # the local staging copy
    if diverged is not None:  # the loop saved nothing of the spoiled weights
        last = latest_checkpoint(loc)
        return Trained(cfg, None if last is None else str(last), None, int(diverged))
    final = str(result.checkpoint) if loc.local else str(loc / Path(result.checkpoint).name)
    return Trained(cfg, final, result.model_id)


def eval_settings(checkpoint: storage.Location, settings: Mapping[str, Any]):
    """The `eval.*` settings to score with: `checkpoint`'s own, with `settings` (per_cell, seed,
    engine, ...; None: the checkpoint's) checked and named as `--set eval.KEY` values are."""
    from abacus_ray.model.checkpoint import read_checkpoint_config, resolve_checkpoint

    first = read_checkpoint_config(resolve_checkpoint(checkpoint))
    return first.with_overrides({f"eval.{k}": v for k, v in settings.items()
                                 if v is not None}).eval


def _prepare_eval(checkpoints: Sequence[str], out: str, device: str | None, threads: int | None,
                  run_id: str | None, use: Sequence[str]):
    from abacus_ray.training.threads import set_threads

    device = None if device is None else check_device(device)
    for given in use:  # imported before any checkpoint's config names them
        plugins.load(given)
    set_threads(threads)
    if run_id is not None:
        check_text(run_id, "--run-id")
    found = check_readable(list(checkpoints), "CHECKPOINT")
    return found, storage.probe(out, "--out"), device  # resolved once, before any model loads


def evaluate(checkpoints: Sequence[str], out: str, *, grid: str | None = None,
             cells: str | None = None, diagonal: str | None = None,
             settings: Mapping[str, Any] | None = None, device: str | None = None,
             samples: bool = False, progress: bool = True, run_id: str | None = None,
             flush_every_s: float = 10.0, flush_every_cells: int = 200,
             plugins: Sequence[str] = (), threads: int | None = None) -> Evaluated:
    """Score `checkpoints` (paths or URIs; a run directory means its latest checkpoint) on one
    grid (`grid` a name, or `cells` / `diagonal` specs; none: the first checkpoint's
    `eval.grids`) into `out`; a rerun scores only the missing cells."""
    from abacus_ray.evaluation.grids import resolve_grid, resolve_grid_names
    from abacus_ray.evaluation.runner import evaluate as run_grid  # heavy: torch

    found, loc, device = _prepare_eval(checkpoints, out, device, threads, run_id, plugins)
    cfg = eval_settings(found[0], settings or {})
    if grid is not None or cells is not None or diagonal is not None:
        grids = [resolve_grid(grid=grid, cells=cells, diagonal_spec=diagonal)]
    else:  # the checkpoint's own eval.grids
        try:
            grids = resolve_grid_names(cfg.grids)
        except ValueError as e:
            raise ValueError(f"eval.grids of {checkpoints[0]}: {str(e).removeprefix('--grid: ')}; "
                             "pass --grid, --cells or --diagonal") from None
    report = run_grid(found, grids, cfg, loc, device=device, samples=samples, progress=progress,
                      run_id=run_id, flush_every_s=flush_every_s,
                      flush_every_cells=flush_every_cells)
    return Evaluated(str(loc), dict(report.evaluated), dict(report.skipped), report.seconds)


@dataclass(frozen=True)
class Scored:
    """A problem file scored on one model: its problems, how many were right, and the results
    part written (None: the file was already scored on this model there)."""

    problems: int
    correct: int
    part: str | None


def score_problems(checkpoint: str, problems: str, out: str, *,
                   settings: Mapping[str, Any] | None = None, device: str | None = None,
                   run_id: str | None = None, plugins: Sequence[str] = (),
                   threads: int | None = None) -> Scored:
    """Score one checkpoint on a file of problems (one a line, the task's syntax): a row per
    problem in `out`/problems, plus cell rows (`evaluation/problem_file.py`)."""
    from abacus_ray.evaluation.problem_file import evaluate_problem_file  # heavy: torch

    found, loc, device = _prepare_eval([checkpoint], out, device, threads, run_id, plugins)
    cfg = eval_settings(found[0], settings or {})
    n, correct, part = evaluate_problem_file(found[0], problems, cfg, loc, device=device,
                                             run_id=run_id)
    return Scored(n, correct, None if part is None else str(part))
