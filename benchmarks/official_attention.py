"""How much slower the official FIRE / RoPE attention path trains than its Abacus / NoPE path (docs/fidelity.md).

The official code runs two attention implementations (docs/official-code.md §4.8): `pytorch` (torch's
`nn.MultiheadAttention`, fused kernels; Abacus and NoPE models) and `self-attention` (a hand-written
sequence-first module: per-head split of the fused projection, `bmm` scores times the `norm_factor`,
the FIRE bias or rotary Q/K, `masked_fill(-10000)`, softmax, `bmm`; FIRE and RoPE models). Under the
official wall-clock budget a slower layer means fewer samples; abacus-ray budgets samples, so every
position type gets the same number. This measures, side by side in one process, forward + backward of
one post-LN decoder layer (attention + GELU-GLU FFN, the paper's widths) with each official path,
written here from the official source's math, and with ours (`CausalSelfAttention`, SDPA) for reference.

    python benchmarks/official_attention.py                  # paper widths, 16 x 64 tokens, CPU
    python benchmarks/official_attention.py --batch 8 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from abacus_ray.model.attention import CausalSelfAttention


class OfficialSeqFirst(nn.Module):
    """The official `SeqFirstSelfAttention` computation, [S, B, H] in and out (FIRE or RoPE)."""

    def __init__(self, hidden: int, heads: int, kind: str) -> None:
        super().__init__()
        self.heads, self.hd, self.kind = heads, hidden // heads, kind
        self.in_proj_weight = nn.Parameter(torch.randn(3 * hidden, hidden) * hidden ** -0.5)
        self.out_proj = nn.Linear(hidden, hidden, bias=False)
        self.register_buffer("norm_factor", torch.tensor(self.hd).rsqrt())
        if kind == "fire":
            self.mlp = nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Linear(32, heads))
            self.c, self.L_mult = nn.Parameter(torch.tensor(0.1)), nn.Parameter(torch.tensor(1.0))
            self.init_L = nn.Parameter(torch.tensor(512.0), requires_grad=False)
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))

    def fire(self, s: int) -> torch.Tensor:
        pos = torch.sort(torch.randperm(s, dtype=torch.float)[:s]).values  # eval/short-sequence positions
        rel = torch.log(torch.abs(self.c * (pos[:, None] - pos[None, :])) + 1)
        norm = torch.log(torch.abs(self.c * torch.max(pos, torch.abs(self.L_mult * self.init_L))[:, None]) + 1)
        return self.mlp((rel / (norm + 1e-6)).unsqueeze(-1)).unsqueeze(0).permute(0, 3, 1, 2)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        s, b, h = x.shape
        mixed = F.linear(x, self.in_proj_weight).view(s, b, self.heads, 3 * self.hd)
        q, k, v = torch.split(mixed, self.hd, dim=3)
        bias = None
        if self.kind == "fire":
            bias = self.fire(s)
        else:
            freqs = torch.arange(s).float()[:, None] * self.inv_freq[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[:, None, None, :], emb.sin()[:, None, None, :]

            def rot(z):
                return torch.cat((-z[..., self.hd // 2:], z[..., :self.hd // 2]), dim=-1)
            q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        qb = q.reshape(s, b * self.heads, self.hd).transpose(0, 1)
        kb = k.reshape(s, b * self.heads, self.hd).transpose(0, 1)
        scores = (torch.bmm(qb, kb.transpose(1, 2)) * self.norm_factor).view(b, self.heads, s, s)
        if bias is not None:
            scores = scores + bias
        probs = torch.softmax(scores.masked_fill(mask, -10000.0), dim=-1)
        ctx = torch.bmm(probs.view(b * self.heads, s, s), v.reshape(s, b * self.heads, self.hd).transpose(0, 1))
        return self.out_proj(ctx.view(b, self.heads, s, self.hd).permute(2, 0, 1, 3).reshape(s, b, h))


class Layer(nn.Module):
    """Post-LN decoder layer around one of the attention variants; input [B, S, H]."""

    def __init__(self, hidden: int, heads: int, intermed: int, variant: str) -> None:
        super().__init__()
        self.variant = variant
        if variant == "official pytorch":
            self.attn = nn.MultiheadAttention(hidden, heads, bias=False, batch_first=True)
        elif variant.startswith("official"):
            self.attn = OfficialSeqFirst(hidden, heads, variant.split()[1])
        else:
            self.attn = CausalSelfAttention(hidden, heads, fire="fire" in variant, rope="rope" in variant)
        self.w_in, self.w_out = nn.Linear(hidden, intermed, bias=False), nn.Linear(intermed // 2, hidden, bias=False)
        self.n1, self.n2 = nn.LayerNorm(hidden, eps=1e-12), nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.shape[1]
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
        if self.variant == "official pytorch":
            a = self.attn(x, x, x, attn_mask=mask, need_weights=False, is_causal=True)[0]
        elif self.variant.startswith("official"):
            a = self.attn(x.transpose(0, 1), mask).transpose(0, 1)
        else:
            a = self.attn(x)[0]
        x = self.n1(x + a)
        value, gate = self.w_in(x).chunk(2, dim=-1)
        return self.n2(x + self.w_out(F.gelu(gate) * value))


VARIANTS = ("official pytorch", "official fire", "official rope", "ours nope", "ours fire", "ours rope")


def seconds_per_step(layer: nn.Module, x: torch.Tensor, repeats: int) -> float:
    """Median seconds of forward + backward over `repeats` timed steps (after one warm-up)."""
    def step() -> None:
        layer(x).square().mean().backward()
        layer.zero_grad(set_to_none=True)

    step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--intermediate", type=int, default=2048)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=64, help="tokens per sample (64: size-20 addition, padded)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the table shows their median and range")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(args.batch, args.seq, args.hidden)
    layers = {v: Layer(args.hidden, args.heads, args.intermediate, v) for v in VARIANTS}
    rounds = {v: [] for v in VARIANTS}
    load = os.getloadavg()[0]
    for _ in range(args.rounds):  # interleaved rounds: drift on a shared machine hits every variant alike
        for v, layer in layers.items():
            rounds[v].append(seconds_per_step(layer, x, args.repeats))
    ratios = {v: sorted(a / b for a, b in zip(rounds[v], rounds["official pytorch"], strict=True)) for v in VARIANTS}
    ms = {v: 1e3 * statistics.median(r) for v, r in rounds.items()}
    print(f"one post-LN layer, forward + backward, hidden {args.hidden}, {args.heads} heads, {args.batch} x {args.seq} "
          f"tokens, {args.threads} CPU threads; median of {args.rounds} interleaved rounds x {args.repeats} steps "
          f"(load average {load:.1f} before, {os.getloadavg()[0]:.1f} after)")
    print(f"{'variant':18s} {'ms/step':>9s} {'time / official pytorch, same round: median [min, max]':>56s}")
    for v in VARIANTS:
        r = ratios[v]
        print(f"{v:18s} {ms[v]:9.1f} {statistics.median(r):38.2f} [{r[0]:.2f}, {r[-1]:.2f}]")


if __name__ == "__main__":
    main()
