"""Token-level position signals added to the embedding: Abacus and learned absolute.

The official embeddings: docs/official-code.md §4.3-4.4.

The Abacus embedding numbers every maximal run of digit tokens 1, 2, 3, ... and gives every other
token position 0 (one learned row shared by operators, `=`, EOS, PAD, letters). Because additions
are written least-significant digit first, digit t of every operand and of the answer share position
t, which is what lets the model line up columns. In training one random offset k ~ U{0..max_k} is
added to every nonzero position of the micro-batch, so the rows for long numbers are trained on
short ones.

Lookups past the end of a table are caught here, on the host, with a `ValueError` naming
`model.abacus_table`, so a too-long evaluation problem never becomes a CUDA device-side assert.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from abacus_ray import plugins
from abacus_ray.config import ExperimentConfig
from abacus_ray.tasks.tokenizer import FIRST_DIGIT_ID, LAST_DIGIT_ID


def digit_mask(input_ids: Tensor) -> Tensor:
    """True where a token is one of the digits '0'..'9' (ids 4..13 in every vocabulary)."""
    return (input_ids >= FIRST_DIGIT_ID) & (input_ids <= LAST_DIGIT_ID)


def abacus_positions(input_ids: Tensor, run_start: Tensor | None = None) -> Tensor:
    """Abacus ids without offset: digit runs numbered 1.., every non-digit 0.

    `run_start` ([B], optional) is the length of a digit run that ended the tokens *before*
    `input_ids` (incremental decoding): a run continuing across the boundary keeps counting.
    Example: `98282+3859172=2787472[EOS]` -> 1 2 3 4 5 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0.
    """
    if input_ids.dim() != 2:
        raise ValueError("input_ids: expected a [batch, seq] tensor, "
                         f"got shape {tuple(input_ids.shape)}")
    digits = digit_mask(input_ids)
    idx = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
    # index of the last non-digit at or before t (-1 if the row has none so far)
    last_break = torch.where(digits, torch.full_like(idx, -1), idx).cummax(dim=-1).values
    pos = idx - last_break
    if run_start is not None:
        pos = pos + torch.where(last_break < 0, run_start.to(pos.dtype)[:, None],
                                torch.zeros_like(pos))
    return torch.where(digits, pos, torch.zeros_like(pos))


def shift_abacus(positions: Tensor, offset: int) -> Tensor:
    """Add the training offset k to every digit position; non-digits stay on row 0."""
    if offset == 0:
        return positions
    return torch.where(positions > 0, positions + offset, positions)


def draw_abacus_offset(max_k: int, generator: torch.Generator | None = None,
                       probs: Tensor | None = None) -> int:
    """One k in {0..max_k} for a whole forward call: the paper's offset draw (Sec. 3), its one home.

    `probs` None is the paper's k ~ U{0..max_k} (both ends inclusive); otherwise k ~ probs (the
    `balanced` draw of `OffsetDraw`). The training loop passes its per-micro-batch generator; a bare
    `model.train()` forward draws from the global torch RNG (no `generator=None` argument:
    torch.compile cannot trace that)."""
    if probs is not None:
        return int(torch.multinomial(probs, 1, generator=generator).item())
    if generator is None:
        return int(torch.randint(0, max_k + 1, ()).item())
    return int(torch.randint(0, max_k + 1, (), generator=generator).item())


@functools.lru_cache(maxsize=16)
def balanced_offset_weights(max_k: int, longest_run: int,
                            iterations: int = 2000) -> tuple[float, ...]:
    """P(k) for k = 0..max_k such that every Abacus row 1..max_k + longest_run is trained about
    equally often.

    Under the paper's uniform k, row p is trained by every offset k < p whose number reaches
    digit p - k; digit d of a run is reached with probability S(d) = (D - d + 1) / D when run
    lengths are uniform on 1..D (D = `longest_run`). The rows past max_k + 1 are reached only by the
    largest offsets and only by long runs, so the highest rows, the ones a long test number needs,
    are trained least: for k = 180 and D = 21 the top row is trained 231x less often than a middle
    one. This solves coverage(p) = sum_k P(k) S(p - k) = constant for P >= 0 by Richardson-Lucy
    iterations (the nonnegative solution closest in KL divergence); it puts extra mass on k = max_k
    (and on k = 0) and brings the top row to 1/27 of the middle (docs/results.md, §6).
    """
    if max_k < 0 or longest_run < 1:
        raise ValueError("model.max_k / longest run: need max_k >= 0 and a run >= 1, "
                         f"got {max_k}, {longest_run}")
    reach = (longest_run - np.arange(longest_run)) / longest_run  # S(1..D)
    cover = np.zeros((max_k + longest_run, max_k + 1))  # cover[p - 1, k] = S(p - k)
    for k in range(max_k + 1):
        cover[k:k + longest_run, k] = reach
    w = np.full(max_k + 1, 1.0 / (max_k + 1))
    col = cover.sum(axis=0)
    for _ in range(iterations):
        c = cover @ w
        w *= (cover.T @ (c.mean() / c)) / col
        w /= w.sum()
    return tuple(float(x) for x in w)


@dataclass(frozen=True)
class OffsetDraw:
    """How a run draws its Abacus offsets (`model.k_draw`): the paper's uniform k, or `balanced`."""

    max_k: int
    probs: Tensor | None = None  # None: uniform

    @classmethod
    def of(cls, cfg: ExperimentConfig) -> OffsetDraw | None:
        """The experiment's draw; None for a model without Abacus positions (nothing to draw)."""
        m = cfg.model
        if not m.uses_abacus:
            return None
        if m.k_draw == "uniform":
            return cls(m.max_k)
        plugin = plugins.K_DRAWS.get(m.k_draw)  # a registered draw's weights, else balanced
        weights = (plugin or balanced_offset_weights)(m.max_k, cfg.task.longest_digit_run)
        return cls(m.max_k, torch.tensor(weights))

    def draw(self, generator: torch.Generator | None = None) -> int:
        return draw_abacus_offset(self.max_k, generator, self.probs)


def table_error(what: str, needed_rows: int, rows: int, detail: str) -> ValueError:
    """The one error for any position past a table: names the config key and how to raise it."""
    return ValueError(
        f"model.abacus_table: {what} needs {needed_rows} rows but the table has {rows} ({detail}); "
        f"raise it, e.g. --set model.abacus_table={needed_rows}"
    )


class AbacusEmbedding(nn.Module):
    """Learned table of `rows` Abacus positions; row 0 is the shared non-digit vector."""

    def __init__(self, rows: int, hidden: int) -> None:
        super().__init__()
        self.rows = rows
        self.table = nn.Embedding(rows, hidden)

    def forward(self, shifted_positions: Tensor) -> Tensor:
        return self.table(shifted_positions)


class LearnedPositions(nn.Module):
    """Absolute learned positions 0..S-1 (the official yaml default; no paper run uses it)."""

    def __init__(self, rows: int, hidden: int) -> None:
        super().__init__()
        self.rows = rows
        self.table = nn.Embedding(rows, hidden)

    def forward(self, start: int, length: int, device: torch.device) -> Tensor:
        """[length, hidden] rows for token indices start..start+length-1."""
        if start + length > self.rows:
            raise table_error(f"learned position {start + length - 1}", start + length, self.rows,
                              f"sequence of {start + length} tokens")
        return self.table(torch.arange(start, start + length, device=device))
