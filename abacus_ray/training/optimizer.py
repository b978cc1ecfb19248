"""AdamW with the paper's two parameter groups (docs/official-code.md §6.2).

The official code exempts from weight decay every parameter whose name contains "bias" or "norm"
(its list also names `LayerNorm.weight`/`LayerNorm.bias`, which is why we match case-insensitively).
That covers every LayerNorm and the FIRE MLP biases; embeddings, all weight matrices and FIRE's `c`
and `L_mult` keep decay 0.01.
"""

from __future__ import annotations

import torch
from torch import nn

from abacus_ray.config.train import TrainConfig

NO_DECAY_MARKERS = ("bias", "norm")


def decays(name: str) -> bool:
    """Whether the parameter called `name` gets weight decay."""
    lowered = name.lower()
    return not any(marker in lowered for marker in NO_DECAY_MARKERS)


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """[decayed group, non-decayed group]; each group also records its parameter names."""
    decay, keep = [], []
    decay_names, keep_names = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if decays(name):
            decay.append(param)
            decay_names.append(name)
        else:
            keep.append(param)
            keep_names.append(name)
    return [
        {"params": decay, "weight_decay": weight_decay, "names": decay_names},
        {"params": keep, "weight_decay": 0.0, "names": keep_names},
    ]


def build_optimizer(model: nn.Module, cfg: TrainConfig,
                    device: torch.device | str = "cpu") -> torch.optim.AdamW:
    """AdamW(lr, betas, eps, weight decay) over the two groups; fused kernels on CUDA, foreach on
    CPU.

    The learning rate is set by the training loop before every step (the trapezoid schedule), so the
    initial `lr` here is only the peak it scales.
    """
    groups = parameter_groups(model, cfg.weight_decay)
    for g in groups:
        g.pop("names")
    groups = [g for g in groups if g["params"]]
    fused = torch.device(device).type == "cuda"
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
                             weight_decay=cfg.weight_decay, fused=fused or None,
                             foreach=None if fused else True)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
