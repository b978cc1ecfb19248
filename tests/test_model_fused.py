"""The one-buffer backward passes of the GLU and the QKV split equal autograd's, bit for bit."""

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from abacus_ray.model import ArithmeticTransformer, ModelConfig, fused
from abacus_ray.model.fused import gelu_glu, split_heads


def reference_glu(h):
    value, gate = h.chunk(2, dim=-1)
    return value * F.gelu(gate)


def reference_split(qkv, heads):
    b, s, width = qkv.shape
    return qkv.view(b, s, 3, heads, width // (3 * heads)).permute(2, 0, 3, 1, 4).unbind(0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gelu_glu_matches_autograd_bit_for_bit(dtype):
    h = torch.randn(3, 5, 16, dtype=dtype, requires_grad=True)
    up = torch.randn(3, 5, 8, dtype=dtype)
    out = gelu_glu(h)
    (grad,) = torch.autograd.grad(out, h, up)
    ref_out = reference_glu(h)
    (ref_grad,) = torch.autograd.grad(ref_out, h, up)
    assert torch.equal(out, ref_out) and torch.equal(grad, ref_grad)
    assert grad.is_contiguous() and grad.dtype == dtype


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_split_heads_matches_autograd_bit_for_bit_even_with_an_unused_output(dtype):
    qkv = torch.randn(2, 7, 3 * 12, dtype=dtype, requires_grad=True)
    ups = [torch.randn(2, 4, 7, 3, dtype=dtype) for _ in range(3)]
    for used in ((0, 1, 2), (0, 2)):  # v alone unused below: its gradient slice is zeros
        mine, ref = split_heads(qkv, 4), reference_split(qkv, 4)
        assert all(torch.equal(a, b) for a, b in zip(mine, ref, strict=True))
        loss = sum((mine[i] * ups[i]).sum() for i in used)
        ref_loss = sum((ref[i] * ups[i]).sum() for i in used)
        (grad,) = torch.autograd.grad(loss, qkv)
        (ref_grad,) = torch.autograd.grad(ref_loss, qkv)
        assert torch.equal(grad, ref_grad) and grad.shape == qkv.shape


def test_plain_ops_without_autograd():
    h = torch.randn(2, 3, 8)
    assert torch.equal(gelu_glu(h), reference_glu(h))
    with torch.no_grad():
        assert torch.equal(gelu_glu(h.requires_grad_()), reference_glu(h))


@pytest.mark.parametrize("precision", ["fp32", "bf16-autocast", "bf16-model"])
def test_a_training_step_is_bit_identical_with_and_without_the_fused_backward(precision, monkeypatch):
    """The whole model (2 x 2, Abacus + FIRE-free attention, progressive grad through both
    recurrences): logits and every parameter gradient equal the plain-autograd path exactly."""
    cfg = ModelConfig(layers=2, recurrences=2, hidden=32, intermediate=64, heads=4, max_k=5, abacus_table=64)
    torch.manual_seed(0)
    model = ArithmeticTransformer(cfg, 19).train()
    if precision == "bf16-model":
        model = model.to(torch.bfloat16)
    ids = torch.randint(0, 19, (3, 12), generator=torch.Generator().manual_seed(1))
    noise = 0.02 * torch.randn(3, 12, 32, generator=torch.Generator().manual_seed(2))

    def step():
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16-autocast"):
            logits = model(ids, noise=noise, abacus_offset=3, grad_recurrences=2)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            F.cross_entropy(logits.reshape(-1, 19), ids.reshape(-1)).backward()
        cats = tuple(sum(e.count for e in prof.key_averages() if e.key == k) for k in ("aten::cat", "aten::copy_"))
        return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, cats

    logits, grads, cats = step()
    monkeypatch.setattr(fused, "_fusable", lambda x: False)
    ref_logits, ref_grads, ref_cats = step()
    # per layer application (4, plus the head's GLU): the GLU's cat and the QKV's permuted copy go
    assert cats[0] == ref_cats[0] - 5 and cats[1] == ref_cats[1] - 4, (cats, ref_cats)
    assert torch.equal(logits, ref_logits)
    assert grads.keys() == ref_grads.keys() and all(torch.equal(grads[n], ref_grads[n]) for n in grads)
