"""Teacher-forced exact match: greedy decoding's verdict from one batched forward pass.

A causal model's logits at position t depend only on tokens 0..t. Greedy decoding of a problem
produces the target answer exactly when, with the target fed in, the argmax after every prefix
prompt + answer[:k] equals answer[k] for every k, EOS included: by induction the greedy decoder then
sees the very same prefixes. If the argmax is wrong at some k, greedy decoding emits that wrong
token at step k and the problem is wrong. So one forward over prompt + answer + EOS scores a problem
(design.md, "Evaluation engine"); the noise at each position must be the same as the decoder's
(`evaluation.noise`), and eval mode fixes the Abacus offset to 0.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from abacus_ray.tasks.tokenizer import EOS


class TeacherForcedScore(NamedTuple):
    correct: Tensor  # [B] bool
    # [B] long: answer position of the first wrong token (EOS = len(answer)); -1 if correct
    first_wrong: Tensor
    first_correct: Tensor  # [B] bool: the first answer token is right (sorting's "min. elem. only")
    # [B] long: the model's token at `first_wrong` (what greedy emits there); -1 if correct
    wrong_token: Tensor
    # [B, S] long: argmax next-token ids, predicted[:, t] is the guess for input_ids[:, t+1]
    predicted: Tensor


def teacher_forced(model, input_ids: Tensor, target_mask: Tensor, *, recurrences: int | None = None,
                   noise: Tensor | None = None, require_eos: bool = True) -> TeacherForcedScore:
    """Score rows of prompt + answer + EOS (right-padded); `target_mask` marks answer tokens and
    EOS.

    `require_eos=False` drops the EOS from the comparison (the official sorting metric,
    docs/official-code.md §7.6).
    """
    if input_ids.shape != target_mask.shape:
        raise ValueError(f"target_mask: shape {tuple(target_mask.shape)} differs from input_ids "
                         f"{tuple(input_ids.shape)}")
    with torch.inference_mode():
        logits = model(input_ids, recurrences=recurrences, noise=noise)
        # the argmax of bf16 logits is taken as is: it is what greedy would pick
        predicted = logits.argmax(dim=-1)
    mask = target_mask.bool()
    if not require_eos:
        mask = mask & (input_ids != EOS)
    target = input_ids[:, 1:]
    scored = mask[:, 1:]
    if bool(mask[:, 0].any()):
        raise ValueError("target_mask: position 0 cannot be a target (nothing precedes it)")
    wrong = scored & (predicted[:, :-1] != target)
    correct = ~wrong.any(dim=1)
    # answer-relative index of a target position = number of scored positions before it
    answer_pos = torch.cumsum(target_mask.bool()[:, 1:].long(), dim=1) - 1
    first_abs = torch.where(wrong, torch.arange(wrong.shape[1], device=wrong.device),
                            torch.full_like(answer_pos, wrong.shape[1])).min(dim=1).values
    at_first = first_abs.clamp(max=wrong.shape[1] - 1)[:, None]
    first_wrong = torch.where(correct, torch.full_like(first_abs, -1),
                              answer_pos.gather(1, at_first)[:, 0])
    first_target = torch.where(scored, torch.arange(scored.shape[1], device=scored.device),
                               torch.full_like(answer_pos, scored.shape[1])).min(dim=1).values
    has_target = first_target < scored.shape[1]
    ft = first_target.clamp(max=scored.shape[1] - 1)[:, None]
    first_correct = has_target & (predicted[:, :-1].gather(1, ft)[:, 0]
                                  == target.gather(1, ft)[:, 0])
    got = predicted[:, :-1].gather(1, at_first)[:, 0]
    wrong_token = torch.where(correct, torch.full_like(got, -1), got)
    return TeacherForcedScore(correct, first_wrong, first_correct, wrong_token, predicted)


def score_teacher_forced(model, batch, *, recurrences: int | None = None,
                         noise: Tensor | None = None,
                         require_eos: bool = True) -> tuple[Tensor, Tensor]:
    """(correct [B] bool, first_wrong [B] long, -1 where correct) for a `tasks.stream.Batch`.

    The model should be in eval mode (Abacus offset 0, FIRE positions 0..S-1).
    """
    s = teacher_forced(model, batch.input_ids, batch.target_mask, recurrences=recurrences,
                       noise=noise, require_eos=require_eos)
    return s.correct, s.first_wrong
