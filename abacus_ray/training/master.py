"""fp32 master weights behind a bf16 working model: `train.precision=bf16-pure`.

Under bf16 autocast (the paper's recipe, and `auto` on CUDA) the parameters and the residual stream
stay fp32 while every matrix product runs in bf16, so each linear casts its input to bf16 and each
backward casts the gradient back (their share of a GPU step: docs/performance.md, "The GPU path").
Here the forward and backward run on a bf16 copy of the model instead, its residual adds and
LayerNorms included (LayerNorm still accumulates in fp32 inside the kernel), and nothing is cast
inside the recurrent block. The fp32 model stays the master: the optimiser, its AdamW state, the
gradient clipping, checkpoints, model ids and validation scores all see fp32 tensors, so a
checkpoint written in this mode is the same file format as any other and resumes in any precision.

Gradients: each backward leaves bf16 gradients on the working copy (summed in bf16 within that
backward, e.g. over the recurrences that share the weights); `collect` adds them into fp32
gradients on the master and frees them, so gradient accumulation over micro-batches is fp32. Over
several ranks no DDP wraps the working copy: each rank collects every backward the same way, and
the loop averages the fp32 master gradients over ranks in one flat all-reduce
(`distributed.average_gradients`) before clipping, so gradients stay fp32 from each backward to the
optimiser on every rank. After the optimiser step `publish` rounds the updated master weights to
bf16 for the next forward.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


class SameWeights:
    """fp32 and every autocast precision: the master model runs forward and backward itself, so
    there is nothing to move (the loop calls the same two hooks whatever the precision)."""

    ddp_wraps = True  # DDP wraps the trained module and averages its gradients

    def __init__(self, master: nn.Module) -> None:
        self.master = self.working = master

    def collect(self) -> None:
        """Nothing to add: the backward left its gradients on the master."""

    def publish(self) -> None:
        """Nothing to round: the optimiser updated the weights that run."""


class MasterWeights:
    """A bf16 working copy of an fp32 `master` model; moves gradients and weights between them."""

    ddp_wraps = False  # no DDP around the working copy: the fp32 master gradients are averaged

    def __init__(self, master: nn.Module, dtype: torch.dtype = torch.bfloat16) -> None:
        self.master = master
        self.working = copy.deepcopy(master).to(dtype)
        self.pairs = list(zip(master.parameters(), self.working.parameters(), strict=True))

    @torch.no_grad()
    def collect(self) -> None:
        """Add the working copy's gradients into the master's fp32 gradients, then free them."""
        for master, working in self.pairs:
            if working.grad is None:
                continue
            if master.grad is None:
                master.grad = working.grad.to(master.dtype)
            else:
                master.grad.add_(working.grad)
            working.grad = None

    @torch.no_grad()
    def publish(self) -> None:
        """Round the master weights (just updated by the optimiser) into the working copy."""
        for master, working in self.pairs:
            working.copy_(master)


def working_model(master: nn.Module, precision: str) -> MasterWeights | SameWeights:
    """The master/working pair for `bf16-pure` training; for every autocast or fp32 precision the
    master alone, which trains itself."""
    return MasterWeights(master) if precision == "bf16-pure" else SameWeights(master)
