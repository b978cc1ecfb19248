"""`distributed.average_gradients` (bf16-pure's fp32 gradient all-reduce) under two gloo ranks: a
gradient one rank lacks counts as zeros there; one that no rank has stays None (the presence-flag
branch), as DDP leaves a parameter no rank used."""

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


def _rank(rank: int, world: int, store: str, out: str) -> None:
    from abacus_ray.training.distributed import average_gradients

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        both, one, none = (nn.Parameter(torch.zeros(3)) for _ in range(3))
        both.grad = torch.full((3,), 2.0 + rank)  # 2 and 3: averaged to 2.5
        if rank == 0:
            one.grad = torch.full((3,), 4.0)  # missing on rank 1: zeros there, 2.0 on average
        average_gradients([both, one, none], process_group=dist.group.WORLD,
                          device=torch.device("cpu"))
        torch.save({"both": both.grad, "one": one.grad, "none": none.grad}, f"{out}.{rank}")
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # spawns gloo ranks
def test_a_gradient_some_or_no_rank_lacks_is_averaged_as_ddp_would(tmp_path):
    mp.spawn(_rank, args=(2, str(tmp_path / "store"), str(tmp_path / "out")), nprocs=2)
    for rank in range(2):
        got = torch.load(tmp_path / f"out.{rank}", weights_only=True)
        assert torch.equal(got["both"], torch.full((3,), 2.5))
        assert torch.equal(got["one"], torch.full((3,), 2.0))
        assert got["none"] is None
