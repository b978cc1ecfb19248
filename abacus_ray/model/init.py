"""DeepNorm-style initialisation ("deepnorm-straight", docs/official-code.md §4.11).

Only the initialisation is DeepNorm's: residuals are not scaled. With N_eff = layers x recurrences
and g = (8 N_eff)^(-1/4):
  * every linear layer (FFNs, head FFN, adapter, decoder, FIRE MLPs) is Xavier-normal with gain g,
    biases zero;
  * attention: Q and K blocks Xavier-normal with gain 1, V block and output projection gain g, each
    block with its own fans (H x H);
  * token / Abacus / learned position embeddings N(0, 1/H); LayerNorms weight 1, bias 0;
  * FIRE's scalars keep their constructor values (c = 0.1, L0 = 512, L_mult = 1).

Deliberate difference from the official code: its sequence-first attention (used with FIRE and RoPE)
initialises the fused QKV rows as if laid out [Q; K; V] while its forward splits them per head, so
heads 0-9 get gain 1 for q, k and v and heads 11-15 the small gain for all three. We give every head
the intended per-Q/K/V gains; this affects the initial weights only.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from abacus_ray.model.attention import CausalSelfAttention


def deepnorm_gain(effective_depth: int) -> float:
    return (8 * effective_depth) ** -0.25


@torch.no_grad()
def deepnorm_init_(model: nn.Module, effective_depth: int, hidden: int) -> None:
    """Initialise `model` in place; a model on the meta device (shapes only) is left as it is, at
    once: the meta kernels would still cost time per tensor (docs/performance.md, "Planning a
    reproduction")."""
    if any(p.is_meta for p in model.parameters()):
        return
    g = deepnorm_gain(effective_depth)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_normal_(m.weight, gain=g)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=1 / math.sqrt(hidden))
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    for m in model.modules():  # attention overrides the generic linear rule
        if isinstance(m, CausalSelfAttention):
            h, w = m.hidden, m.qkv.weight
            nn.init.xavier_normal_(w[:h], gain=1.0)
            nn.init.xavier_normal_(w[h:2 * h], gain=1.0)
            nn.init.xavier_normal_(w[2 * h:], gain=g)
            nn.init.xavier_normal_(m.out.weight, gain=g)
