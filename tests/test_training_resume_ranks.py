"""A data-parallel run resumed from a checkpoint continues every rank's random streams: N steps on
two gloo ranks straight equal N/2 steps, checkpoint, resume on two ranks, N/2 steps, bit for bit.

Each rank draws its own initial-state noise from its global torch RNG (`seeds.rank_seed`), so a
checkpoint that kept rank 0's streams alone (and reseeded the others at resume) trained another
model after a restart than the same run uninterrupted.
"""

import shutil
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from test_training_loop import small

from abacus_ray.config import ExperimentConfig
from abacus_ray.model.checkpoint import load_checkpoint
from abacus_ray.storage import on_disk
from abacus_ray.training.loop import train

pytestmark = pytest.mark.slow  # spawns gloo ranks

STEPS = 6


def _rank(rank, world, store, cfg_dict, out, resume):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)

    def keep_halfway(metrics):  # rank 0 writes the checkpoints
        if rank == 0 and resume is None and metrics["step"] == STEPS // 2 and metrics["checkpoint"]:
            shutil.copytree(metrics["checkpoint"], f"{out}/halfway")

    try:
        result = train(ExperimentConfig.from_dict(cfg_dict), process_group=dist.group.WORLD,
                       report=keep_halfway, checkpoint_dir=Path(out, f"ckpt-{rank}"),
                       resume_from=on_disk(Path(resume)) if resume else None)
        torch.save({"model_id": result.model_id, "losses": result.losses}, f"{out}/rank-{rank}.pt")
        dist.barrier()  # no rank tears gloo down while the other still talks
    finally:
        dist.destroy_process_group()


def run(cfg, out, resume=None) -> list[dict]:
    out.mkdir()
    mp.spawn(_rank, args=(2, str(out / "store"), cfg.to_dict(), str(out), resume), nprocs=2)
    return [torch.load(out / f"rank-{r}.pt", weights_only=True) for r in range(2)]


def test_two_ranks_resumed_halfway_train_the_same_model_as_straight_through(tmp_path):
    cfg = small(f"train.max_steps={STEPS}", "train.global_batch=16", "train.micro_batch=4",
                "train.checkpoint_every_min=1e-9")  # a checkpoint every step
    assert cfg.model.init_state == "noise"  # drawn from each rank's own stream
    straight = run(cfg, tmp_path / "straight")
    halfway = tmp_path / "straight" / "halfway"
    assert load_checkpoint(on_disk(halfway)).meta["step"] == STEPS // 2
    resumed = run(cfg, tmp_path / "resumed", resume=str(halfway))
    assert resumed[0]["losses"] == straight[0]["losses"][STEPS // 2:]
    assert resumed[0]["model_id"] == resumed[1]["model_id"] == straight[0]["model_id"]
