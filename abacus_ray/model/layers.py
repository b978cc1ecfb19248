"""The decoder layer and its GELU-GLU feed-forward (docs/official-code.md §4.9).

Post-LN is the paper's layer: x = LN(x + Attn(x)); x = LN(x + FFN(x)). Pre-LN (x + Attn(LN(x))) is
offered as a stability option. LayerNorm eps is 1e-12 and no linear has a bias.
"""

from __future__ import annotations

from torch import Tensor, nn

from abacus_ray.model.attention import KV, CausalSelfAttention
from abacus_ray.model.fused import gelu_glu
from abacus_ray.plugins import Bias

LN_EPS = 1e-12


def layer_norm(hidden: int) -> nn.LayerNorm:
    return nn.LayerNorm(hidden, eps=LN_EPS)


class GLUFeedForward(nn.Module):
    """H -> intermediate -> GLU -> intermediate/2 -> H. `intermediate` is the GLU's *input* width:
    the first half is the value, the second half the gate, through exact (erf) GELU."""

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.w_in = nn.Linear(hidden, intermediate, bias=False)
        self.w_out = nn.Linear(intermediate // 2, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_out(gelu_glu(self.w_in(x)))


class DecoderLayer(nn.Module):
    def __init__(self, hidden: int, intermediate: int, heads: int, *, norm: str = "post",
                 rope: bool = False, fire: bool = False, fire_max_length: int = 0,
                 bias: Bias | None = None) -> None:
        super().__init__()
        self.pre_norm = norm == "pre"
        self.attn = CausalSelfAttention(hidden, heads, rope=rope, fire=fire,
                                        fire_max_length=fire_max_length, bias=bias)
        self.ffn = GLUFeedForward(hidden, intermediate)
        self.norm1 = layer_norm(hidden)
        self.norm2 = layer_norm(hidden)

    def forward(self, x: Tensor, start: int = 0, past: KV | None = None, *,
                cached: bool = False) -> tuple[Tensor, KV]:
        if self.pre_norm:
            a, kv = self.attn(self.norm1(x), start, past, cached=cached)
            x = x + a
            return x + self.ffn(self.norm2(x)), kv
        a, kv = self.attn(x, start, past, cached=cached)
        x = self.norm1(x + a)
        return self.norm2(x + self.ffn(x)), kv
