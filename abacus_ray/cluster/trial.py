"""One Tune trial = one Ray Train `TorchTrainer` whose workers run `abacus_ray.training.train`.

Ray enters at three marked calls: the trainer's scaling/run config (`TorchTrainer(...)`), the
checkpoint to resume from (`ray.train.get_checkpoint()`), and the report barrier
(`ray.train.report(...)`) that the training loop's `report` callback drives. Everything else is the
plain PyTorch loop. A restarted worker group (`FailureConfig`) resumes from the latest reported
checkpoint; a restored Tune trial reuses its Train run name, so Train V2 finds that run's
checkpoints in storage and resumes too.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import ray
import ray.train
import ray.train.torch
import torch
import torch.distributed as dist
from ray import tune
from ray.train import Checkpoint, CheckpointConfig, FailureConfig, ScalingConfig
from ray.train.torch import TorchTrainer
from ray.tune.integration.ray_train import TuneReportCallback

from abacus_ray import storage
from abacus_ray.cluster.placement import worker_bundle
from abacus_ray.cluster.rendezvous import LoopbackTorchConfig
from abacus_ray.config import ExperimentConfig
from abacus_ray.evaluation.validation import Validation
from abacus_ray.model.checkpoint import KEPT_CHECKPOINTS
from abacus_ray.sweep_dir import SweepDir
from abacus_ray.training.loop import train

MAX_FAILURES = 3  # worker-group restarts per trial before the trial errors
REPORTED_KEYS = (
    "step",
    "samples",
    "tokens",
    "loss",
    "lr",
    "batch_size",
    "tokens_per_s",
    "samples_per_s",
    "budget_fraction",
    "device_hours",
    "eta_s",
    "elapsed_s",
    "world_size",
    "final",
    "model_id",
    "mfu",
    "diverged_at_step",
    "disk_full",
)


def run_name(result) -> str:
    """The run name (`params["run"]`) of one of Tune's results. `Result.config` comes from the
    trial's last report, so a trial killed before its first report has none; the `params.json` Tune
    writes into the trial's directory when the trial starts still names it."""
    if result.config and "run" in result.config:
        return result.config["run"]
    params = storage.located(result.filesystem, f"{result.path}/params.json")
    return json.loads(storage.read_text(params))["run"]


class _NoRoom(OSError):
    """The disk that keeps the trial's checkpoints has no room for the next one (found before
    handing it to Ray: a report Ray failed to persist is not retried cleanly)."""


def _check_room(checkpoint: Path, train_path: str | None) -> None:
    """Refuse a checkpoint that the disk of `train_path` (a local or shared directory; None: an
    object store, which has no free-space figure) cannot hold twice over."""
    if train_path is None:
        return
    disk = storage.on_disk(Path(train_path))
    free = storage.free_bytes(disk)
    if free is not None and free < 2 * storage.tree_bytes(storage.on_disk(checkpoint)):
        raise _NoRoom(errno.ENOSPC, os.strerror(errno.ENOSPC), train_path)


def _train_and_report(cfg: ExperimentConfig, device, group, previous, report_fn,
                      train_path: str | None = None) -> None:
    """Resume from `previous` (a Ray checkpoint or None), train, and hand every
    report to `report_fn`; `train_path`: where Ray keeps the checkpoints, when on a disk here."""
    # Where and since when this trial (its rank 0) runs, in every report: the driver's timeline
    node = {"node_id": ray.get_runtime_context().get_node_id(), "started_at": time.time()}  # RAY
    scratch = Path(tempfile.mkdtemp(prefix="abacus-trial-"))
    resume = (storage.on_disk(Path(previous.to_directory(str(scratch / "resume"))))
              if previous is not None else None)

    def report(metrics: dict[str, Any]) -> None:
        clean = {k: v for k, v in metrics.items()
                 if v is not None and (k in REPORTED_KEYS or k.startswith("validation"))}
        clean |= node | {"reported_at": time.time()}
        path = metrics.get("checkpoint")
        if path:
            _check_room(Path(path), train_path)
        checkpoint = Checkpoint.from_directory(path) if path else None
        report_fn(
            clean, checkpoint=checkpoint, checkpoint_dir_name=Path(path).name if path else None
        )

    try:
        train(
            cfg,
            device,
            process_group=group,
            report=report,
            checkpoint_dir=scratch / "checkpoints",
            resume_from=resume,
            validation=Validation.of(cfg),
        )
    except _NoRoom as e:
        if group is not None:  # several workers: Ray Train ends the group
            raise
        # A full disk: no restart or retry can help, so the trial ends here with the reason in its
        # last report (one line in the sweep's closing message) instead of a traceback per retry.
        report_fn(node | {"disk_full": f"{e.filename}: {e.strerror}", "reported_at": time.time()},
                  checkpoint=None, checkpoint_dir_name=None)
    finally:
        storage.delete(storage.on_disk(scratch), quiet=True)


def train_worker(loop_config: dict[str, Any]) -> None:
    """Runs in every Ray Train worker: resume if Ray has a checkpoint, train, report through Ray."""
    # the trial's config object itself (pickled by Ray)
    cfg: ExperimentConfig = loop_config["experiment"]
    train_path = loop_config.get("train_path")
    world = ray.train.get_context().get_world_size()
    group = dist.group.WORLD if world > 1 and dist.is_initialized() else None
    # RAY: the worker's GPU; a GPU slot without CUDA (a test cluster's fake GPU) trains on the CPU
    device = ray.train.torch.get_device() if torch.cuda.is_available() else torch.device("cpu")
    _train_and_report(cfg, device, group,
                      # RAY: latest checkpoint of this run (restart or restore)
                      ray.train.get_checkpoint(),
                      # RAY: a barrier over the workers; the loop reports at agreed steps
                      ray.train.report, train_path)


def _train_in_trial(cfg: ExperimentConfig) -> None:
    """`cluster.trainer=function`: the loop runs in the Tune trial process; Tune
    keeps the checkpoints."""
    device = torch.device("cuda" if cfg.cluster.use_gpu and torch.cuda.is_available() else "cpu")

    def report(metrics, *, checkpoint=None, checkpoint_dir_name=None):
        del checkpoint_dir_name  # Tune names its own checkpoint directories
        tune.report(metrics, checkpoint=checkpoint)  # RAY

    _train_and_report(cfg, device, None, tune.get_checkpoint(), report)  # RAY: resume point


def _train_run(run: str, train_path: str, filesystem: Any) -> str:
    """The trial's Ray Train run name (its checkpoints' directory under `train_path`): named after
    the trial, or the one an older sweep named after Tune's trial id, where that one exists."""
    root = (storage.on_disk(Path(train_path)) if filesystem is None
            else storage.located(filesystem, train_path))
    return SweepDir.of(root.parent).train_run(run, tune.get_context().get_trial_id()).name  # RAY


def run_trial(params: dict[str, Any], configs: dict[str, ExperimentConfig], train_path: str,
              filesystem: Any = None) -> None:
    """The Tune function trainable: fits one `TorchTrainer` for the config named by `params["run"]`.

    `configs` (every trial's config by run name), `train_path` (the Train runs' directory: a path in
    `filesystem`, a `pyarrow.fs.FileSystem` for an object store, None for a local or shared disk)
    are bound with `tune.with_parameters`; the rest of `params` are the swept values Tune shows,
    already part of the config.
    """
    cfg = configs[params["run"]]
    cl = cfg.cluster
    if cl.trainer == "function":
        _train_in_trial(cfg)
        return
    per_worker = worker_bundle(cl)
    # RAY: one Train run per trial; DDP over `workers` (gloo on CPU, nccl on GPU)
    trainer = TorchTrainer(
        train_worker,
        train_loop_config={"experiment": cfg,
                           "train_path": train_path if filesystem is None else None},
        # RAY: process group via a FileStore when on one node (no listener)
        torch_config=LoopbackTorchConfig(),
        scaling_config=ScalingConfig(
            num_workers=cl.workers,
            use_gpu=cl.use_gpu,
            resources_per_worker=per_worker,
            placement_strategy=cl.placement,
        ),
        run_config=ray.train.RunConfig(
            name=_train_run(params["run"], train_path, filesystem),  # same on restore
            storage_path=train_path,
            # RAY: checkpoints go to the object store from the worker's node
            storage_filesystem=filesystem,
            checkpoint_config=CheckpointConfig(num_to_keep=KEPT_CHECKPOINTS),
            failure_config=FailureConfig(max_failures=MAX_FAILURES),
            callbacks=[TuneReportCallback()],
        ),
    )
    trainer.fit()
