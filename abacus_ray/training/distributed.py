"""Data-parallel training helpers: rank/world from a process group, DDP wrapping, agreement.

Every rank must take the same decisions (accumulation count, stop, report, checkpoint), or the
gradient all-reduce deadlocks. The loop therefore adopts rank 0's clock once per optimiser step, in
the same all-reduce that sums the step's loss, its tokens and the ranks' gradient norms (before the
optimiser runs, so that all ranks stop alike at a non-finite one).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn


def rank_and_world(process_group: Any | None) -> tuple[int, int]:
    """(rank, world size) within `process_group`; (0, 1) without one."""
    if process_group is None:
        return 0, 1
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError("process_group: torch.distributed is not initialised")
    return dist.get_rank(process_group), dist.get_world_size(process_group)


def wrap_ddp(model: nn.Module, device: torch.device, process_group: Any, *,
             find_unused: bool = False) -> nn.Module:
    """DDP around `model`; gradients are all-reduced only when `no_sync` is not active."""
    device_ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids,
                                               process_group=process_group,
                                               find_unused_parameters=find_unused)


def agree(values: list[float], *, rank: int, process_group: Any | None, device: torch.device,
          from_rank0: int = 0) -> list[float]:
    """Sum `values` over ranks, except the first `from_rank0` entries, which take rank 0's value.

    With no process group the values come back unchanged (no device synchronisation beyond
    `.tolist`).
    """
    if process_group is None:
        return [float(v) for v in values]
    data = [(v if rank == 0 else 0.0) if i < from_rank0 else v for i, v in enumerate(values)]
    t = torch.tensor(data, dtype=torch.float64, device=_collective_device(process_group, device))
    dist.all_reduce(t, op=dist.ReduceOp.SUM, group=process_group)
    return t.tolist()



def average_gradients(params: list[nn.Parameter], *, process_group: Any,
                      device: torch.device) -> None:
    """Average `params`' gradients over ranks in one flat all-reduce in their own dtype (fp32 for
    the master weights of `bf16-pure`), as DDP averages the models it wraps.

    A gradient missing on some ranks counts as zeros there; one missing on every rank stays None
    (as DDP leaves a parameter that no rank used): a presence flag per parameter travels in the
    same buffer.
    """
    world = dist.get_world_size(process_group)
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flags = [float(p.grad is not None) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads]
                     + [torch.tensor(flags, dtype=grads[0].dtype, device=device)])
    flat = flat.to(_collective_device(process_group, device))
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=process_group)
    flat = flat.to(device)
    present = flat[-len(params):].tolist()
    offset = 0
    for p, grad, seen in zip(params, grads, present, strict=True):
        n = p.numel()
        if seen:
            p.grad = grad.copy_(flat[offset:offset + n].view_as(p)).div_(world)
        offset += n


def _collective_device(process_group: Any, device: torch.device) -> torch.device:
    return device if dist.get_backend(process_group) == "nccl" else torch.device("cpu")


def global_denominator(local: int, *, reduction: str, world: int, process_group: Any,
                       device: torch.device) -> torch.Tensor | int:
    """The loss denominator of the whole global micro-batch (see `objective.loss_denominator`).

    `mean`: scored targets summed over ranks; `none`: B_global * (S - 1), S the task's longest line,
    the same on every rank, so no collective is needed. Without DDP: `local`. A summed result stays
    on the device (no host synchronisation).
    """
    if process_group is None or world == 1:
        return local
    if reduction != "mean":
        return local * world
    t = torch.tensor([float(local)], dtype=torch.float32,
                     device=_collective_device(process_group, device))
    dist.all_reduce(t, op=dist.ReduceOp.SUM, group=process_group)
    return t.to(device, non_blocking=True)[0]
