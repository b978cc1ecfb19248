"""Rotary position embedding: GPT-NeoX rotate-half on Q and K, base 10000, no parameters.

The official code's: docs/official-code.md §4.6.

Applied per head at 0-based token positions; with a KV cache the new tokens continue from the cached
length, and the cache stores keys already rotated, so cached decoding equals the full forward.
"""

from __future__ import annotations

import torch
from torch import Tensor

ROPE_BASE = 10000.0


def rotate_half(x: Tensor) -> Tensor:
    """[x1 | x2] -> [-x2 | x1] over the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_tables(positions: Tensor, head_dim: int, base: float = ROPE_BASE) -> tuple[Tensor, Tensor]:
    """cos and sin [S, head_dim] of frequencies base^(-2i/head_dim), repeated for both halves."""
    even = torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32)
    inv_freq = base ** (-even / head_dim)
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x' = x cos + rotate_half(x) sin for x [..., S, head_dim]: computed in fp32, in x's dtype."""
    xf = x.float()
    return (xf * cos + rotate_half(xf) * sin).to(x.dtype)
