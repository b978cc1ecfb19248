"""How one run spreads over ranks, chosen once at start-up: the loop asks it, never the world size.

Three shapes: one process (nothing to do), DDP around the module that runs forward and backward
(its gradients are all-reduced on the last backward of a step, `no_sync` before it), or ranks that
average the fp32 master gradients themselves after accumulating (`bf16-pure`, whose bf16 working
copy DDP does not wrap: `training/master.py`). Every rank also agrees, once per step, on rank 0's
clock and the step's summed loss, tokens and gradient norm (`distributed.agree`), so that all ranks
take the same decisions.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from abacus_ray.training.distributed import (
    agree,
    average_gradients,
    global_denominator,
    rank_and_world,
    wrap_ddp,
)


class DataParallel:
    """The ranks of a run (`process_group`: a torch.distributed group, or None for one process)."""

    def __init__(self, process_group: Any, device: torch.device) -> None:
        self.process_group, self.device = process_group, device
        self.rank, self.world = rank_and_world(process_group)
        self.ddp = False  # whether `wrap` put DDP around the trained module

    def wrap(self, module: nn.Module, *, ddp_wraps: bool, find_unused: bool) -> nn.Module:
        """The module the loop calls: `module` itself, or DDP around it over several ranks where
        DDP may wrap it (`ddp_wraps`; `find_unused`: a parameter may get no gradient)."""
        if self.world == 1 or not ddp_wraps:
            return module
        self.ddp = True
        return wrap_ddp(module, self.device, self.process_group, find_unused=find_unused)

    def backward_context(self, forward: nn.Module, *, last: bool):
        """Around one backward: DDP's all-reduce only on the step's last one."""
        if isinstance(forward, DistributedDataParallel) and not last:
            return forward.no_sync()
        return contextlib.nullcontext()

    def finish_gradients(self, model: nn.Module) -> None:
        """After the last backward: average gradients no DDP averaged (`bf16-pure`'s fp32 master
        gradients over several ranks); nothing in one process or under DDP."""
        if self.world > 1 and not self.ddp:
            average_gradients(list(model.parameters()), process_group=self.process_group,
                              device=self.device)

    def denominator(self, local: int, reduction: str) -> torch.Tensor | int:
        """The whole global micro-batch's loss denominator (`distributed.global_denominator`)."""
        return global_denominator(local, reduction=reduction, world=self.world,
                                  process_group=self.process_group, device=self.device)

    def agree(self, values: list[float], *, from_rank0: int = 0) -> list[float]:
        """`values` summed over ranks, the first `from_rank0` taken from rank 0."""
        return agree(values, rank=self.rank, process_group=self.process_group,
                     device=self.device, from_rank0=from_rank0)


def unwrapped(module: nn.Module) -> nn.Module:
    """The model inside DDP, or `module` itself."""
    return module.module if isinstance(module, DistributedDataParallel) else module
