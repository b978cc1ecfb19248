"""Causal multi-head self-attention with optional RoPE or FIRE, by `scaled_dot_product_attention`.

No biases (docs/official-code.md §4.8). Q, K, V come from one fused [3H, H] projection laid out as
[Q; K; V] blocks of H rows (torch MultiheadAttention's layout), so the DeepNorm init can give Q and
K gain 1 and V the small gain as intended (the official sequence-first module splits per head and
so mixes the gains; see `init.py`). Scores are scaled by 1/sqrt(head_dim) (= 1/8 for the paper's
64-dim heads).

Masking: plain causal attention uses `is_causal=True` (the fused kernels); FIRE passes its bias with
-inf above the diagonal as a float mask. With a KV cache the queries are the new tokens at absolute
indices start.., attending to every cached key and to new keys up to themselves.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from abacus_ray.model.fire import FIRE, fire_positions
from abacus_ray.model.fused import split_heads
from abacus_ray.model.rope import apply_rope, rope_tables
from abacus_ray.plugins import Bias

KV = tuple[Tensor, Tensor]


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int, *, rope: bool = False, fire: bool = False,
                 fire_max_length: int = 0, bias: Bias | None = None) -> None:
        """`bias`: a registered position scheme's (`abacus_ray.plugins`), built per layer."""
        super().__init__()
        self.hidden, self.heads, self.head_dim = hidden, heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)
        self.rope = rope
        self.fire = FIRE(heads) if fire else None
        self.bias = bias(heads) if bias is not None else None
        self.fire_max_length = fire_max_length

    def forward(self, x: Tensor, start: int = 0, past: KV | None = None, *,
                cached: bool = False) -> tuple[Tensor, KV]:
        """x [B, Sq, H] are the tokens at indices start..start+Sq-1; `past` their predecessors'
        (k, v).

        `cached` (a KV cache is in use) turns randomised FIRE off: incremental decoding needs
        positions that do not change between calls. Returns the output [B, Sq, H] and the (k, v)
        [B, heads, start+Sq, head_dim] for the cache.
        """
        b, sq, _ = x.shape
        q, k, v = split_heads(self.qkv(x), self.heads)
        if self.rope:
            cos, sin = rope_tables(torch.arange(start, start + sq, device=x.device), self.head_dim)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if past is not None:
            k = torch.cat((past[0], k), dim=2)
            v = torch.cat((past[1], v), dim=2)
        sk = k.shape[2]
        mask, causal = self._mask(sq, sk, start, x.device, q.dtype,
                                  randomise=self.training and not cached)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        return self.out(y.transpose(1, 2).reshape(b, sq, self.hidden)), (k, v)

    def _mask(self, sq: int, sk: int, start: int, device: torch.device, dtype: torch.dtype,
              randomise: bool) -> tuple[Tensor | None, bool]:
        """(attn_mask, is_causal) for queries start..start+sq-1 over keys 0..sk-1."""
        if self.fire is not None:
            pos = fire_positions(0, sk, device,
                                 randomise_to=self.fire_max_length if randomise else 0)
            bias = self.fire(pos[start:], pos)
            allowed = _allowed(sq, sk, start, device)
            return bias.masked_fill(~allowed, float("-inf")).to(dtype).unsqueeze(0), False
        if self.bias is not None:  # a plugin's scheme: plain token indices in, [H, Sq, Sk] out
            pos = torch.arange(sk, device=device)
            bias = self.bias(pos[start:], pos)
            allowed = _allowed(sq, sk, start, device)
            return bias.masked_fill(~allowed, float("-inf")).to(dtype).unsqueeze(0), False
        if start == 0:
            return None, sq > 1
        if sq == 1:
            return None, False  # one new token sees every key
        return _allowed(sq, sk, start, device), False


def _allowed(sq: int, sk: int, start: int, device: torch.device) -> Tensor:
    """Bool [sq, sk]: query i (absolute index start+i) may attend key j iff j <= start+i."""
    q_idx = torch.arange(start, start + sq, device=device)[:, None]
    return torch.arange(sk, device=device)[None, :] <= q_idx
