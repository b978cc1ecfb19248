"""Batch widths, chosen once at start-up: eager batches at their own width, or, under a compiled
recurrent block, every batch padded to the task's longest line.

A compiled block is compiled for one sequence length (`model.compile_block`), so each batch is
padded to it. Two things must not change with the padding, or `train.compile` would change what is
trained: the loss denominator (the task's longest line under `loss_reduction=none`, whatever the
batch: `objective.loss_denominator`) and the initial recurrent state, which is drawn at the batch's
own width from the same RNG at the same point as an eager forward draws it, then zero-padded
(`Padding.noise`), so the real tokens get the noise eager training gives them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from abacus_ray.tasks.stream import pad_batch


class Padding:
    """`fixed_len`: the compiled block's length, or None for eager batches."""

    def __init__(self, fixed_len: int | None) -> None:
        self.fixed_len = fixed_len

    def shape(self, batch: Any) -> tuple[Any, int]:
        """The batch as the model takes it, and its own width before any padding."""
        width = batch.input_ids.shape[1]
        return (batch if self.fixed_len is None else pad_batch(batch, self.fixed_len)), width

    def noise(self, model: nn.Module, ids: torch.Tensor, width: int) -> dict[str, torch.Tensor]:
        """The forward's extra `noise` argument for a padded batch (none for an eager one): the
        initial state drawn at the real width, zero-padded."""
        if ids.shape[1] <= width:
            return {}
        state = model.initial_state(ids.shape[0], width, device=ids.device)
        return {"noise": torch.nn.functional.pad(state, (0, 0, 0, ids.shape[1] - width))}
