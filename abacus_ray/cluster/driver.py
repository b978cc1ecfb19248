"""The main job on Ray: a Tune sweep of Train trials, then Ray Data grid evaluation into Parquet.

`{storage}` is a `abacus_ray.storage.Location`: a local directory (one
machine, or a mount every node
sees: checked by `cluster/shared_dir.py`) or an object-store URI, handed to Tune and Train as their
`storage_path` + `storage_filesystem`. The files and folders under `{storage}/{sweep}/` are named by
`abacus_ray.sweep_dir.SweepDir` (`sweep.json`, `tune/`, `train/`, `results/`, ...). Rerunning the
same command resumes: finished trials are kept, unfinished ones continue from their latest
checkpoint, and only missing cells are evaluated. The trials arrive expanded
(`abacus_ray.sweep.Sweep.expand`); each one's `ExperimentConfig` object travels to its trial and its
evaluation unchanged, once an unset `cluster.use_gpu` is decided by the cluster's GPUs
(`cluster/devices.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ray.exceptions
from ray import tune
from ray.tune import ResultGrid
from ray.tune.search.basic_variant import BasicVariantGenerator

from abacus_ray import storage, trial_status
from abacus_ray.cluster import runtime
from abacus_ray.cluster.devices import Price, resolve_devices
from abacus_ray.cluster.grid_eval import evaluate_on_ray
from abacus_ray.cluster.outcome import DISK_FULL, Outcome, failure_reason, outcomes, write_timeline
from abacus_ray.cluster.placement import DRIVER_CPU, PendingWatch, max_concurrency, worker_bundle
from abacus_ray.cluster.search import scheduler, write_search
from abacus_ray.cluster.shared_dir import check_every_node_sees
from abacus_ray.cluster.tracking import callbacks as tracking_callbacks
from abacus_ray.cluster.tracking import close_runs, log_evaluation
from abacus_ray.cluster.trial import run_trial
from abacus_ray.config import ExperimentConfig
from abacus_ray.evaluation.grids import Grid
from abacus_ray.evaluation.results import retire_shorter, write_table
from abacus_ray.evaluation.work import Source, work_items
from abacus_ray.storage import Location
from abacus_ray.sweep import Search, Trial
from abacus_ray.sweep_dir import SweepDir

MAX_TRIAL_FAILURES = 3  # a trial whose driver died (its node lost) restarts, resuming its Train run


def trial_resources(cfg: ExperimentConfig) -> tune.PlacementGroupFactory:
    """What the Tune trial itself holds: a TorchTrainer trial's driver only waits on its workers
    (their placement group is Ray Train's); a `function` trial is the worker."""
    if cfg.cluster.trainer == "torch":
        return tune.PlacementGroupFactory([{"CPU": DRIVER_CPU}])
    return tune.PlacementGroupFactory([worker_bundle(cfg.cluster)])


EVALUATION = "evaluation"  # the `failures` key of an evaluation stopped by lost actors


def failure_line(name: str, total: int, failures: Mapping[str, str],
                 statuses: Mapping[str, str]) -> str:
    """The sweep's closing line naming every trial that failed, with why (`failures`: run name
    -> reason; `statuses`: run name -> `trial_status`, which says which of them diverged)."""
    spoiled = {k for k, v in statuses.items() if v == trial_status.DIVERGED}
    trials = {k: v for k, v in failures.items() if k != EVALUATION and k not in spoiled}
    diverged = {k: v for k, v in failures.items() if k != EVALUATION and k in spoiled}
    parts = []
    if trials:
        named = "; ".join(f"{run} ({why})" for run, why in sorted(trials.items()))
        parts.append(f"{len(trials)} of {total} trial(s) failed: {named}; the others finished. "
                     "Rerun the same command to retry them (finished trials are kept)")
    # a rerun would diverge again (a run is a pure function of its config): a config to change
    if diverged:
        named = "; ".join(f"{run} ({why})" for run, why in sorted(diverged.items()))
        parts.append(f"{len(diverged)} of {total} trial(s) diverged (loss or gradient norm not "
                     f"finite; not scored): {named}; a lower train.lr or another config is needed")
    if EVALUATION in failures:
        parts.append(f"evaluation stopped ({failures[EVALUATION]}); rerun the same command to "
                     "evaluate the missing cells")
    return f"{name}: " + "; ".join(parts)


def _tuner(name: str, trials: Sequence[Trial], by_name: dict[str, ExperimentConfig], dirs: SweepDir,
           tracking: str, search: Search | None, home: Path | str, limit: int,
           exp: Location) -> tune.Tuner:
    """A new Tuner over the expanded points (at most `limit` at once) as the Tune experiment
    `exp`, or that experiment restored from its storage."""
    train_path, fs = dirs.train.ray_storage  # RAY: Train's storage_path + storage_filesystem
    trainable = tune.with_resources(  # RAY: each trial holds what its own config asks for
        tune.with_parameters(run_trial, configs=by_name, train_path=train_path, filesystem=fs),
        lambda params: trial_resources(by_name[params["run"]]))
    tune_path, tune_fs = storage.tune_storage(dirs.root)  # RAY: Tune's state, each file whole
    if tune.Tuner.can_restore(exp.path, storage_filesystem=tune_fs):
        print(f"{name}: resuming {exp}", file=sys.stderr)
        return tune.Tuner.restore(exp.path, trainable, resume_errored=True,  # RAY: resume the sweep
                                  storage_filesystem=tune_fs)
    # RAY: one trial per expanded point. The param space holds the swept values themselves (the
    # status table's columns); the searcher replays exactly the points, and each trial
    # finds its config by `run`.
    points = [{"run": t.name, **t.params} for t in trials]
    choices: dict[str, list[Any]] = {}
    for p in points:
        for k, v in p.items():
            choices.setdefault(k, []).append(v)
    return tune.Tuner(
        trainable,
        param_space={k: tune.choice(v) for k, v in choices.items()},
        tune_config=tune.TuneConfig(num_samples=len(points), search_alg=BasicVariantGenerator(
            points_to_evaluate=points, max_concurrent=limit),
            scheduler=scheduler(search, trials) if search is not None else None),  # RAY: ASHA
        run_config=tune.RunConfig(name=exp.name, storage_path=tune_path, storage_filesystem=tune_fs,
                                  verbose=1,
                                  failure_config=tune.FailureConfig(
                                      max_failures=MAX_TRIAL_FAILURES),
                                  callbacks=tracking_callbacks(tracking, home, name, by_name)),
    )


def search_line(name: str, total: int, outcome: Outcome, table: Location) -> str:
    """The search's summary line: its trials by status (a diverged or errored trial is not one that
    ASHA stopped; `failure_line` names them)."""
    statuses = list(outcome.statuses.values())
    return (f"{name}: search of {total} point(s): {len(outcome.finished)} ran their budget, "
            f"{statuses.count(trial_status.STOPPED)} stopped early by ASHA, "
            f"{statuses.count(trial_status.DIVERGED)} diverged, "
            f"{statuses.count(trial_status.ERROR)} failed; {table}")


def write_trial_record(root: Location, outcome: Outcome) -> Location:
    """The sweep's trial record (`SweepDir.trials`), atomically: what `eval-all` reads to score what
    the sweep scored."""
    return write_table(SweepDir.of(root).trials, trial_status.record_table(outcome.record))


@dataclasses.dataclass(frozen=True)
class SweepRun:
    """What a sweep found: its directory, what became of every trial, and why each trial that
    failed failed (an evaluation stopped by lost actors under `EVALUATION`)."""

    dirs: SweepDir
    outcome: Outcome
    failures: dict[str, str]

    @property
    def root(self) -> Location:
        return self.dirs.root

    @property
    def statuses(self) -> dict[str, str]:
        return self.outcome.statuses

    @property
    def finished(self) -> list[tuple[Source, ExperimentConfig]]:
        """The finished trials' final checkpoints and configs (what was scored)."""
        return list(self.outcome.finished.values())


def _train(name: str, preset_name: str, trials: Sequence[Trial], dirs: SweepDir, tracking: str,
           search: Search | None, home: Path | str, price: Price | None,
           claim: dict | None = None) -> Outcome:
    """Fit (or resume) every trial through Tune; write the trial record, the timeline and a
    search's table; end the trials' MLflow runs. Returns what became of every trial."""
    trials = resolve_devices(name, trials, price)  # before placement, sweep.json and any trial
    by_name = {t.name: t.config for t in trials}
    # fails now, before anything is written, if a trial never fits
    limit = max_concurrency(list(by_name.values()))
    grown = dirs.check_same(SweepDir.spec_of(preset_name, [t.config for t in trials], claim))
    if grown:
        print(f"{name}: growing the sweep: {grown.words()}", file=sys.stderr)
    exp = dirs.tune_run(SweepDir.generation(dirs.read_spec()))
    tuner = _tuner(name, trials, by_name, dirs, tracking, search, home, limit, exp)
    watch = PendingWatch(min(cfg.cluster.wait_warn_s for cfg in by_name.values()))
    watch.start()
    try:
        grid = _fit(tuner, dirs, exp)
    except BaseException as e:
        if tracking == "mlflow":  # the sweep itself stopped: no run stays RUNNING
            _unless_disk_full(lambda: close_runs(home, name, {}))
        if storage.disk_full(e) is not None:
            raise _full(dirs, {}) from None
        raise
    finally:
        watch.stop()
    outcome = Outcome(outcomes(grid, dirs.root, history=search is not None), by_name, dirs.root)
    full = {run: why for run, why in outcome.reasons.items() if why.startswith(DISK_FULL)}
    if full:  # records and runs where they still fit; the sweep ends in one line per trial
        _unless_disk_full(lambda: write_trial_record(dirs.root, outcome))
        if tracking == "mlflow":
            _unless_disk_full(lambda: close_runs(home, name, {f: "failed" for f in full}))
        raise _full(dirs, full)
    write_trial_record(dirs.root, outcome)  # each trial's status and checkpoint
    write_timeline(dirs, outcome.trials, by_name)  # where and when each trial ran
    stopped = outcome.having(trial_status.STOPPED, trial_status.FINISHED)  # FINISHED: no checkpoint
    unfinished = stopped
    if search is not None:
        table = write_search(dirs.root, outcome.trials, trials, search)
        print(search_line(name, len(trials), outcome, table), file=sys.stderr)
        unfinished = []  # stopping the weaker trials is the search's work, not a failure
    if tracking == "mlflow":
        close_runs(home, name, {**{f: "finished" for f in outcome.finished},
                                **{f: "stopped" for f in stopped},
                                **{f: "failed" for f in outcome.reasons}})
    if unfinished:
        print(f"{name}: {len(unfinished)} trial(s) did not finish: {', '.join(unfinished)}",
              file=sys.stderr)
    # RAY: Tune catches Ctrl-C itself, saves its state and returns, its trials stopped unfinished
    # while their workers still hold the CPUs; outside a search nothing else stops a trial. So the
    # interrupt is passed on (records written, runs closed): scoring would wait for CPUs forever,
    # and `reproduce` would start a sweep that cannot place its workers
    if search is None and outcome.having(trial_status.STOPPED):
        raise KeyboardInterrupt
    return outcome


def _unless_disk_full(write: Callable[[], Any]) -> None:
    """A bookkeeping write that a full disk may refuse: the sweep is ending on that disk anyway."""
    try:
        with quiet_full_disk():
            write()
    except Exception as e:
        if storage.disk_full(e) is None:
            raise


def _fit(tuner: tune.Tuner, dirs: SweepDir, exp: Location) -> ResultGrid:
    """RAY: run the trials. On a disk that filled, Tune may have left a trial's pickled error
    cut short and fail reading it back (`EOFError`); on that disk, those files go and the grid is
    read again, each trial's own report saying the disk was full. Any other failure is raised."""
    with quiet_full_disk():
        try:
            return tuner.fit()
        except Exception as e:  # noqa: BLE001 - EOFError, or a pickle cut mid-way
            free = storage.free_bytes(dirs.root)
            if storage.disk_full(e) is not None or free is None or free >= 1 << 20:
                raise  # the full disk itself (the caller's one line), or another fault, whole
            for cut in storage.find(exp, "error.pkl"):
                storage.delete(cut)
            return tuner.get_results()


def _full(dirs: SweepDir, trials: Mapping[str, str]) -> OSError:
    """The error a sweep ends in when its disk fills: each trial it stopped named in one line first
    (on stderr), then one line for the sweep itself."""
    for run, why in sorted(trials.items()):
        print(f"{run}: stopped, {why}", file=sys.stderr)
    return OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} ({len(trials)} trial(s) stopped "
                   "by it); free space and rerun the same command: finished trials and the "
                   "last checkpoints are kept", str(dirs.root))


@contextlib.contextmanager
def quiet_full_disk():
    """While Tune runs: its warnings about a full disk where it saves its state (a traceback every
    10 s) and MLflow's about its store (tracking stops there, `tracking.py`) are dropped; the trials
    report that disk themselves (`trial.py`)."""
    loggers = [logging.getLogger(name) for name in (
        "ray.train._internal.syncer", "ray.tune.execution.experiment_state",  # RAY: Tune's state
        "mlflow.store.db.utils")]

    def keep(record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            return storage.disk_full(record.exc_info[1]) is None
        return storage.disk_full(OSError(text)) is None

    for logger in loggers:
        logger.addFilter(keep)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(keep)


def run_sweep(name: str, preset_name: str, trials: Sequence[Trial], *, storage_root: Location,
              grids: Mapping[tuple[str, ...], Sequence[Grid]], address: str | None = None,
              evaluate: bool = True, num_cpus: int | None = None,
              eval_recurrences: tuple[int, ...] = (), tracking: str = "mlflow",
              search: Search | None = None, tracking_uri: str | None = None,
              price: Price | None = None, claim: dict | None = None) -> SweepRun:
    """Train and evaluate one figure's sweep under `storage_root` (the probed `--storage`); returns
    what it found (`SweepRun`: its directory, a local path or an object-store URI, every trial's
    status, the failures). Each finished trial is scored on its own config's `eval` settings, on
    `grids` (every trial's `eval.grids`, resolved once by the caller); trials with equal settings
    share one Ray Data pass. A local storage directory must be one every node sees (`shared_dir`).
    MLflow logs to `tracking_uri` when given, else to the sweep's own store (`SweepDir.tracking`).
    `claim`: a sweep file's own claim, recorded in `sweep.json` (`SweepDir.spec_of`).

    A trial that failed, or an evaluation stopped by lost actors, does not stop the others: the
    finished trials are still evaluated, and the caller says what failed (`failure_line`)."""
    dirs = SweepDir(storage_root, name)
    runtime.init(address, num_cpus=num_cpus)
    runtime.quiet_data_progress()
    if dirs.root.local:  # before anything trains: a node that cannot see it would fail at the end
        check_every_node_sees(storage_root.as_path(), "--storage")
    home = tracking_uri or dirs.tracking
    outcome = _train(name, preset_name, trials, dirs, tracking, search, home, price, claim)
    failures = dict(outcome.reasons)
    finished = list(outcome.finished.values())
    _retire_superseded(name, dirs, finished)
    try:
        _evaluate(name, dirs, finished if evaluate else [], grids, eval_recurrences, tracking, home)
    # RAY: evaluator actors lost on every attempt (memory monitor, nodes)
    except ray.exceptions.RayError as e:
        failures[EVALUATION] = failure_reason(e)
    return SweepRun(dirs, outcome, failures)


def _retire_superseded(name: str, dirs: SweepDir,
                       finished: list[tuple[Source, ExperimentConfig]]) -> None:
    """In a sweep that grew, move the rows of models its finished trials have since trained
    further out of its results, before the new models are scored (`results.retire_shorter`)."""
    if SweepDir.generation(dirs.read_spec()) == 0 or not storage.is_dir(dirs.results):
        return
    steps = {cfg.name: cfg.train.max_steps for _, cfg in finished}
    moved = retire_shorter(dirs.results, dirs.superseded, steps)
    if moved:
        print(f"{name}: {moved} cell rows of models since trained further moved to "
              f"{dirs.superseded}", file=sys.stderr)


def _evaluate(name: str, dirs: SweepDir, finished: list[tuple[Source, ExperimentConfig]],
              grids: Mapping[tuple[str, ...], Sequence[Grid]], eval_recurrences: tuple[int, ...],
              tracking: str, home: Path | str) -> None:
    """Score every finished trial on its own eval settings, then log the region
    means to its MLflow run."""
    if finished:
        groups: dict[Any, list[Source]] = {}
        for source, cfg in finished:
            groups.setdefault(cfg.eval, []).append(source)
        for eval_cfg, sources in groups.items():
            for r in eval_recurrences or (None,):
                cfg_r = dataclasses.replace(eval_cfg, recurrences=r)
                work = work_items(sources, list(grids[eval_cfg.grids]), cfg_r, dirs.results)
                report = evaluate_on_ray(work, cfg_r, dirs.results)
                print(
                    f"{name}: evaluated {report.cells} cells ({report.skipped} already present) on "
                    f"{len(report.workers)} actor(s) in {report.seconds:.1f}s",
                    file=sys.stderr,
                )
        if tracking == "mlflow":
            log_evaluation(home, name, finished, dirs.results)
