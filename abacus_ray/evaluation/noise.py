"""Per-cell seeded initial-state noise, so every engine sees the same noise and reruns reproduce.

The official model starts its recurrent state from fresh N(0, init_std^2) noise on every forward
pass, eval included (docs/official-code.md §0.2, §7.1), so its eval numbers are not reproducible and
a KV-cache decoder would see different noise than a full forward. Here each cell draws one tensor
[problems, length, hidden] from a `torch.Generator` seeded from (eval seed, task, i, j)
(`seeds.cell_seed`), and every engine passes the slice for the positions it computes as `noise=`:
problem b, position t always gets `noise[b, t]`, whether it is computed teacher-forced, from a KV
cache or by the naive loop, and however cells are packed into batches.

The generator lives on the model's device (a host-side draw of ~10^8 numbers per cell would cost
more than the GPU forward), so the same cell draws the same noise on every run on the same device
type; CPU and CUDA draws differ.
"""

from __future__ import annotations

import torch
from torch import Tensor


def uses_noise(model_cfg) -> bool:
    """Whether the model's initial state is random (then eval must pass seeded noise)."""
    return (getattr(model_cfg, "init_state", "zeros") == "noise"
            and getattr(model_cfg, "init_std", 0.0) > 0)


def cell_noise(model_cfg, seed: int, rows: int, length: int,
               device: torch.device | str) -> Tensor | None:
    """The cell's initial states [rows, length, hidden] (init_std * N(0, 1)), or None for a zero
    start."""
    if not uses_noise(model_cfg):
        return None
    device = torch.device(device)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return model_cfg.init_std * torch.randn(rows, length, model_cfg.hidden, generator=gen,
                                            device=device)


def gather_noise(noises: list[Tensor | None], rows: list[tuple[int, int]], length: int, hidden: int,
                 device: torch.device | str) -> Tensor | None:
    """Noise [len(rows), length, hidden] for `rows` (cell index, row) of per-cell tensors `noises`.

    Each row is cut or zero-padded to `length` positions. Positions past a cell's noise length are
    only ever padding or tokens past that row's own decoding limit, whose outputs are discarded, so
    zeros there change no result. Runs of consecutive rows of one cell are copied as one block.
    """
    if noises[rows[0][0]] is None:
        return None
    out = torch.zeros(len(rows), length, hidden, device=device)
    b = 0
    while b < len(rows):
        c, r = rows[b]
        e = b + 1
        while e < len(rows) and rows[e] == (c, r + e - b):
            e += 1
        n = min(length, noises[c].shape[1])
        out[b:e, :n] = noises[c][r:r + e - b, :n]
        b = e
    return out
