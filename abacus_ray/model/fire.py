"""FIRE: Functional Interpolation for Relative positions, an additive attention bias.

The official module: docs/official-code.md §4.5.

Each attention layer owns one FIRE module (shared across recurrences because the layer is). For
query position p_i and key position p_j the bias of head h is

    MLP( log(1 + |c (p_i - p_j)|) / (log(1 + |c max(p_i, |L_mult L0|)|) + 1e-6) )_h

with MLP 1 -> 32 -> ReLU -> heads (biases included), c = 0.1 and L_mult = 1 learnable, L0 = 512 a
frozen parameter (it still counts in `num_params`, as in the official code: 595 parameters a layer
for 16 heads). Every sequence in this project is shorter than 512 tokens, so the denominator is a
learnable constant, exactly as in the official code.

Randomised FIRE (Fig. 21): in training, when `max_length` exceeds the sequence length, positions are
a sorted random subset of {0..max_length-1}, redrawn at every call (per layer, per recurrence).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

FIRE_WIDTH = 32
FIRE_L0 = 512.0


class FIRE(nn.Module):
    def __init__(self, heads: int, width: int = FIRE_WIDTH, init_c: float = 0.1,
                 init_l0: float = FIRE_L0, eps: float = 1e-6) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, width), nn.ReLU(), nn.Linear(width, heads))
        self.c = nn.Parameter(torch.tensor(init_c))
        self.L0 = nn.Parameter(torch.tensor(init_l0), requires_grad=False)
        self.L_mult = nn.Parameter(torch.tensor(1.0))
        self.eps = eps

    def forward(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        """Bias [heads, Sq, Sk] for float positions `q_pos` [Sq] and `k_pos` [Sk], one per batch."""
        q_pos = q_pos.float()
        k_pos = k_pos.float()
        c = self.c.float()
        threshold = (self.L_mult.float() * self.L0.float()).abs()
        num = torch.log1p((c * (q_pos[:, None] - k_pos[None, :])).abs())
        den = torch.log1p((c * torch.maximum(q_pos, threshold)).abs()) + self.eps
        return self.mlp((num / den[:, None]).unsqueeze(-1)).permute(2, 0, 1)


def fire_positions(start: int, length: int, device: torch.device, *,
                   randomise_to: int = 0) -> Tensor:
    """Positions of tokens start..start+length-1 (float), or a sorted random `length`-subset of
    {0..randomise_to-1} when `randomise_to > length` (randomised FIRE, training only, no cache)."""
    if randomise_to > length and start == 0:
        return torch.randperm(randomise_to, device=device)[:length].sort().values.float()
    return torch.arange(start, start + length, device=device, dtype=torch.float32)
