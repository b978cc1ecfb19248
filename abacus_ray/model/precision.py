"""Mixed precision for training steps and evaluation forwards (docs/official-code.md §6.6).

`auto` (the rule in `config.train.resolved_precision`) trains with bf16 autocast on CUDA (no loss
scaling needed) and plain fp32 on CPU, where autocast is slower than fp32 for models this small, and
evaluates in fp32 everywhere (the official evaluation's precision, docs/fidelity.md). `fp16` is the
paper's setting: fp16 autocast with a GradScaler, fp32 master weights. Master weights are fp32 in
every mode. On CUDA `fp32` means true fp32 matrix products and `tf32` lets them run on TF32 tensor
cores (the official evaluation's fp32 with PyTorch's default; docs/fidelity.md measures how many
verdicts each changes). `bf16-pure` (evaluation only) runs the whole forward in bf16, weights and
residual stream included, where autocast keeps the residual adds, LayerNorms and noise in fp32
(their share of GPU time: docs/performance.md, "The GPU path").
"""

from __future__ import annotations

import contextlib
import weakref
from copy import deepcopy
from dataclasses import dataclass

import torch

from abacus_ray.config.train import PRECISIONS, resolved_precision

# model -> its bf16 copy (evaluation)
_BF16_COPIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Precision:
    name: str  # resolved: fp32 | tf32 | bf16 | fp16 | bf16-pure
    device_type: str

    @property
    def dtype(self) -> torch.dtype | None:
        """The autocast dtype (None: no autocast)."""
        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.name)

    def model_for(self, model: torch.nn.Module) -> torch.nn.Module:
        """The model to run: itself, or for `bf16-pure` a bf16 copy, made once per model object."""
        if self.name != "bf16-pure":
            return model
        copy = _BF16_COPIES.get(model)
        if copy is None:
            copy = _BF16_COPIES[model] = deepcopy(model).to(torch.bfloat16).eval()
        return copy

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.dtype is not None:
            return torch.autocast(device_type=self.device_type, dtype=self.dtype)
        if self.device_type == "cuda":
            return _matmul_tf32(self.name == "tf32")
        return contextlib.nullcontext()

    def grad_scaler(self) -> torch.amp.GradScaler:
        """A GradScaler, enabled only for fp16 (a disabled scaler is a no-op pass-through)."""
        return torch.amp.GradScaler(self.device_type, enabled=self.name == "fp16")


@contextlib.contextmanager
def _matmul_tf32(allowed: bool):
    """fp32 matrix products on CUDA with TF32 allowed or not, restored afterwards."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def resolve_precision(name: str, device: torch.device | str,
                      key: str = "train.precision") -> Precision:
    if name not in PRECISIONS:
        raise ValueError(f"{key}: {name!r} is not one of {', '.join(PRECISIONS)}")
    device_type = torch.device(device).type
    evaluation = key.startswith("eval.")
    return Precision(resolved_precision(name, device_type, evaluation=evaluation), device_type)
