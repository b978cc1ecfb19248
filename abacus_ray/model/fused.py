"""Backward passes that write each layer's input gradient into one buffer instead of concatenating.

In eager autograd two backward nodes of every layer application concatenate; input injection (a
sum), the Abacus offset (a `where`) and the progressive loss (separate calls, summed losses) do not:

* the GLU splits its input projection into value and gate (`chunk`): autograd's split backward
  concatenates the two half-width gradients into a new [.., intermediate] tensor;
* attention splits the fused QKV projection into q, k, v (`view` + `permute` + `unbind`): the unbind
  backward stacks the three gradients ([3, B, heads, S, d], a `cat`), and the view backward then
  copies that permuted stack into the [B, S, 3H] layout the projection's backward needs.

Here the GLU's two gradients are computed straight into the halves of one buffer laid out as its
input, with the kernels autograd would run (`mul`, `gelu_backward`), and the three attention
gradients are stacked once, straight into the projection's layout. The results are bit-identical,
and per layer application one full pass over the GLU's input gradient (its `cat`) and one over the
QKV gradient (the permuted copy) disappear (their share of a GPU step: docs/performance.md, "The
GPU path"). Compiled code does not take this path: inductor fuses the concatenations itself.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


class _GeluGLU(torch.autograd.Function):
    """value * gelu(gate) over the halves of `h`; the backward fills one gradient buffer for `h`."""

    @staticmethod
    def forward(ctx, h: Tensor) -> Tensor:
        value, gate = h.chunk(2, dim=-1)
        activated = F.gelu(gate)
        ctx.save_for_backward(value, gate, activated)
        return value * activated

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        value, gate, activated = ctx.saved_tensors
        grad_h = torch.empty(*grad.shape[:-1], 2 * grad.shape[-1], dtype=grad.dtype,
                             device=grad.device)
        grad_value, grad_gate = grad_h.chunk(2, dim=-1)
        torch.mul(grad, activated, out=grad_value)
        torch.ops.aten.gelu_backward.grad_input(grad * value, gate, grad_input=grad_gate)
        return grad_h


class _SplitHeads(torch.autograd.Function):
    """[B, S, 3H] -> q, k, v, each [B, heads, S, head_dim] (views); the backward writes the three
    gradients into one [B, S, 3, heads, head_dim] buffer, the projection's own layout."""

    @staticmethod
    def forward(ctx, qkv: Tensor, heads: int) -> tuple[Tensor, Tensor, Tensor]:
        b, s, width = qkv.shape
        ctx.shape = (b, s, 3, heads, width // (3 * heads))
        q, k, v = qkv.view(ctx.shape).permute(2, 0, 3, 1, 4).unbind(0)
        return q, k, v

    @staticmethod
    def backward(ctx, grad_q: Tensor | None, grad_k: Tensor | None,
                 grad_v: Tensor | None) -> tuple[Tensor, None]:
        some = next(g for g in (grad_q, grad_k, grad_v) if g is not None)
        grads = [(g if g is not None else torch.zeros_like(some)).transpose(1, 2)
                 for g in (grad_q, grad_k, grad_v)]
        buffer = torch.empty(ctx.shape, dtype=some.dtype, device=some.device)
        torch.stack(grads, dim=2, out=buffer)  # one kernel, straight into [B, S, 3, heads, d]
        b, s = ctx.shape[:2]
        return buffer.view(b, s, -1), None


def _fusable(x: Tensor) -> bool:
    """Eager autograd only: under torch.compile, or with no graph to build, plain ops are better."""
    return x.requires_grad and torch.is_grad_enabled() and not torch.compiler.is_compiling()


def gelu_glu(h: Tensor) -> Tensor:
    """First half (value) times exact GELU of the second half (gate) of the last dimension."""
    if _fusable(h):
        return _GeluGLU.apply(h)
    value, gate = h.chunk(2, dim=-1)
    return value * F.gelu(gate)


def split_heads(qkv: Tensor, heads: int) -> tuple[Tensor, Tensor, Tensor]:
    """q, k, v [B, heads, S, head_dim] from a fused [B, S, 3H] projection of [Q; K; V] blocks."""
    if _fusable(qkv):
        return _SplitHeads.apply(qkv, heads)
    b, s, width = qkv.shape
    q, k, v = qkv.view(b, s, 3, heads, width // (3 * heads)).permute(2, 0, 3, 1, 4).unbind(0)
    return q, k, v
