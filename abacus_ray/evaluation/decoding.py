"""Greedy decoders: KV-cache (the real one), per-recurrence (Fig. 15), and the naive oracle.

All take a batch of prompts of *equal length* (callers group rows by prompt length), so no attention
padding or left-alignment is needed and every row's positions are 0..P-1 as in training. `noise`,
when given, is the initial recurrent state for positions 0..P+max_new-1 ([B, >= P+max_new, hidden]);
each call passes the slice for the positions it computes, so all decoders and the teacher-forced
scorer see the same noise per position (`evaluation.noise`).

Decoding stops after `max_new` tokens or once every row has emitted EOS. Tokens a row generates
after its own EOS are returned as generated; `match` ignores them.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from abacus_ray.tasks.tokenizer import EOS, PAD


def _check(prompt_ids: Tensor, max_new: int, noise: Tensor | None) -> None:
    if prompt_ids.dim() != 2 or prompt_ids.shape[1] < 1:
        raise ValueError("prompt_ids: expected [batch, prompt_len >= 1], "
                         f"got {tuple(prompt_ids.shape)}")
    if max_new < 1:
        raise ValueError(f"max_new: must be >= 1, got {max_new}")
    if noise is not None and noise.shape[1] < prompt_ids.shape[1] + max_new - 1:
        raise ValueError(f"noise: covers {noise.shape[1]} positions, decoding needs "
                         f"{prompt_ids.shape[1] + max_new - 1}")


def _slice(noise: Tensor | None, start: int, stop: int) -> Tensor | None:
    return None if noise is None else noise[:, start:stop]


@torch.inference_mode()
def greedy_kv(model, prompt_ids: Tensor, max_new: int, *, recurrences: int | None = None,
              noise: Tensor | None = None) -> Tensor:
    """Greedy tokens [B, T <= max_new] with a KV cache: one prefill, then one token per step."""
    _check(prompt_ids, max_new, noise)
    p = prompt_ids.shape[1]
    cache = model.new_cache()
    logits = model(prompt_ids, recurrences=recurrences, noise=_slice(noise, 0, p), cache=cache)
    out = [logits[:, -1].argmax(dim=-1)]
    done = out[0] == EOS
    for step in range(1, max_new):
        if bool(done.all()):
            break
        pos = p + step - 1  # position of the token being fed
        logits = model(out[-1][:, None], recurrences=recurrences,
                       noise=_slice(noise, pos, pos + 1), cache=cache)
        out.append(logits[:, -1].argmax(dim=-1))
        done |= out[-1] == EOS
    return torch.stack(out, dim=1)


@torch.inference_mode()
def greedy_naive(model, prompt_ids: Tensor, max_new: int, *, recurrences: int | None = None,
                 noise: Tensor | None = None) -> Tensor:
    """Greedy tokens with a full forward over the whole sequence per token (the official loop,
    docs/official-code.md §4.14, plus early stopping). Kept as the benchmark baseline and the test
    oracle."""
    _check(prompt_ids, max_new, noise)
    seq = prompt_ids
    out: list[Tensor] = []
    done = torch.zeros(prompt_ids.shape[0], dtype=torch.bool, device=prompt_ids.device)
    for _ in range(max_new):
        logits = model(seq, recurrences=recurrences, noise=_slice(noise, 0, seq.shape[1]))
        nxt = logits[:, -1].argmax(dim=-1)
        out.append(nxt)
        done |= nxt == EOS
        if bool(done.all()):
            break
        seq = torch.cat([seq, nxt[:, None]], dim=1)
    return torch.stack(out, dim=1)


@torch.inference_mode()
def greedy_per_recurrence(model, prompt_ids: Tensor, max_new: int, *,
                          recurrences: int | None = None, noise: Tensor | None = None,
                          use_cache: bool = True) -> Tensor:
    """Tokens [R, B, T]: the argmax after every recurrence r at every generated step (Fig. 15,
    docs/official-code.md §7.8).

    The token fed back is the last recurrence's, so row R-1 equals `greedy_kv`'s output.
    """
    _check(prompt_ids, max_new, noise)
    p = prompt_ids.shape[1]
    cache = model.new_cache() if use_cache else None
    seq = prompt_ids
    steps: list[Tensor] = []
    done = torch.zeros(prompt_ids.shape[0], dtype=torch.bool, device=prompt_ids.device)
    for step in range(max_new):
        if cache is None:
            logits = model(seq, recurrences=recurrences, noise=_slice(noise, 0, seq.shape[1]),
                           all_recurrences=True)
        elif step == 0:
            logits = model(prompt_ids, recurrences=recurrences, noise=_slice(noise, 0, p),
                           cache=cache, all_recurrences=True)
        else:
            pos = p + step - 1
            logits = model(steps[-1][-1][:, None], recurrences=recurrences,
                           noise=_slice(noise, pos, pos + 1), cache=cache, all_recurrences=True)
        per_r = logits[:, :, -1].argmax(dim=-1)  # [R, B]
        steps.append(per_r)
        done |= per_r[-1] == EOS
        if bool(done.all()):
            break
        if cache is None:
            seq = torch.cat([seq, per_r[-1][:, None]], dim=1)
    return torch.stack(steps, dim=2)


class Match(NamedTuple):
    correct: list[bool]
    first_wrong: list[int]  # answer position of the first wrong token, -1 if correct
    first_correct: list[bool]
    stopped: list[bool]  # EOS within the row's limit
    predictions: list[list[int]]  # generated ids up to (excluding) EOS, within the row's limit
    # the generated token at `first_wrong` (PAD past the output's end); -1 if correct
    wrong_token: list[int]


def match(generated: Tensor, targets: list[list[int]], limits: list[int], *,
          require_eos: bool = True, drop_above: int | None = None) -> Match:
    """Compare greedy outputs with targets (answer ids + EOS) the way exact match does
    (docs/official-code.md §7.3).

    Row b's output is cut to its own `limits[b]` tokens so the verdict does not depend on which
    other rows shared its batch. With `require_eos=False` the EOS is not compared (sorting,
    docs/official-code.md §7.6). `drop_above` deletes every id above it from the output and the
    target before comparing: the official index-hint rule, which drops the hint symbols (ids above
    `=`) and scores the digits (docs/official-code.md §2.4).
    """
    rows = generated.tolist()
    res = Match([], [], [], [], [], [])
    for row, target, limit in zip(rows, targets, limits, strict=True):
        row = row[:limit]
        if drop_above is not None:
            row = [t for t in row if t <= drop_above]
            target = [t for t in target if t <= drop_above]
        stopped = EOS in row
        pred = row[: row.index(EOS)] if stopped else row
        emitted = pred + [EOS] if stopped else pred  # greedy output, everything after EOS is PAD
        want = target if require_eos else [t for t in target if t != EOS]
        got = emitted + [PAD] * max(0, len(want) - len(emitted))
        wrong = next((k for k in range(len(want)) if got[k] != want[k]), -1)
        res.correct.append(wrong == -1)
        res.first_wrong.append(wrong)
        res.first_correct.append(bool(want) and got[0] == want[0])
        res.stopped.append(stopped)
        res.predictions.append(pred)
        res.wrong_token.append(got[wrong] if wrong >= 0 else -1)
    return res
