"""Next-token cross-entropy on the answer: which targets are scored and how they are averaged.

The official objective: docs/official-code.md §4.13. The target at position t (predicted from t-1)
is scored iff it is not PAD and, with `mask_before_equals` (every paper run but Fig. 16), it lies
after the `=`: the answer digits and the EOS. Reductions:
* `mean`: token mean over the scored targets of the micro-batch (the default);
* `none`: the official code's per-token loss averaged over the whole padded length S-1, then over
  the batch, i.e. sum(scored CE) / (B * (S-1)) (multiplication). The official tensors were padded to
  the dataset's longest line, so S is a constant of the task: the training loop passes that length
  (`tasks.stream.padded_length`), never the batch's own width, so that eager batches (padded to
  their longest row) and compiled ones (padded to the task's longest line) train one objective.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from abacus_ray.config.train import REDUCTIONS
from abacus_ray.tasks.tokenizer import PAD


def scored_targets(input_ids: torch.Tensor, target_mask: torch.Tensor | None,
                   mask_before_equals: bool) -> torch.Tensor:
    """Bool [B, S-1]: True where the target input_ids[:, 1:] counts in the loss."""
    if mask_before_equals:
        if target_mask is None:
            raise ValueError("target_mask: required when mask_before_equals is on")
        return target_mask[:, 1:] & (input_ids[:, 1:] != PAD)
    return input_ids[:, 1:] != PAD


def loss_denominator(input_ids: torch.Tensor, target_mask: torch.Tensor | None, *,
                     reduction: str = "mean", mask_before_equals: bool = True,
                     line_length: int | None = None) -> int:
    """What `reduction` divides the summed CE by: the scored targets (`mean`) or B * (S-1)
    (`none`), S the dataset's longest line in tokens (`line_length`; without it, the batch's
    width)."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction: {reduction!r} is not one of {', '.join(REDUCTIONS)}")
    if reduction == "mean":
        return int(scored_targets(input_ids, target_mask, mask_before_equals).sum())
    length = input_ids.shape[1] if line_length is None else line_length
    return input_ids.shape[0] * (length - 1)


def answer_loss(logits: torch.Tensor, input_ids: torch.Tensor, target_mask: torch.Tensor | None, *,
                reduction: str = "mean", mask_before_equals: bool = True,
                denominator: torch.Tensor | float | None = None) -> torch.Tensor:
    """Scalar float32 loss of `logits` [B, S, V] against the shifted `input_ids` [B, S].

    `denominator` overrides `loss_denominator(...)`: data-parallel training passes the global one so
    that ranks' losses add up to the loss of the whole global micro-batch.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction: {reduction!r} is not one of {', '.join(REDUCTIONS)}")
    if logits.dim() != 3 or logits.shape[:2] != input_ids.shape:
        raise ValueError(f"logits: shape {tuple(logits.shape)} does not match input_ids "
                         f"{tuple(input_ids.shape)}")
    batch, seq = input_ids.shape
    scored = scored_targets(input_ids, target_mask, mask_before_equals)
    per_token = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                                input_ids[:, 1:].reshape(-1), reduction="none").view(batch, seq - 1)
    total = torch.where(scored, per_token, torch.zeros_like(per_token)).sum()
    if denominator is None:
        denominator = scored.sum() if reduction == "mean" else batch * (seq - 1)
    if isinstance(denominator, torch.Tensor):
        return total / denominator.clamp_min(1)
    return total / max(denominator, 1)
