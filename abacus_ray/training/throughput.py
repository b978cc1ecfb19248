"""Throughput accounting for progress reports: windowed rates, ETA and model FLOPs utilisation.

MFU = achieved model FLOPs / peak dense bf16 FLOPs of the devices held. Achieved FLOPs count every
(padded) position the model computes on, at `model.flops_per_token(S, R_eff)` where R_eff is the
progressive loss's mean cost in full recurrences (no-grad recurrences cost ~1/3). Peaks come from a
small table of data-centre GPUs (dense, no sparsity) or the `ABACUS_RAY_PEAK_TFLOPS` environment
variable; on an unknown device MFU is left out rather than guessed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

# Dense bf16/fp16 tensor-core peaks in TFLOP/s (data sheets), matched against the CUDA device name
# (first hit wins).
PEAK_TFLOPS = (
    ("H200", 989.0), ("H100 PCIe", 756.0), ("H100", 989.0), ("GH200", 989.0), ("B200", 2250.0),
    ("A100", 312.0), ("A10G", 70.0), ("A10", 125.0), ("L40S", 362.0), ("L4", 121.0),
    ("RTX A4000", 76.7), ("V100", 125.0), ("T4", 65.0),
)


def peak_flops(device: torch.device | str) -> float | None:
    """Peak dense bf16 FLOP/s of one device, or None when unknown (CPU, unlisted GPU)."""
    override = os.environ.get("ABACUS_RAY_PEAK_TFLOPS")
    if override:
        return float(override) * 1e12
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(device)
    for key, tflops in PEAK_TFLOPS:
        if key in name:
            return tflops * 1e12
    return None


@dataclass
class Window:
    """Counters since the previous report."""

    start_s: float = 0.0
    steps: int = 0
    samples: int = 0
    tokens: int = 0
    positions: int = 0  # padded positions (B x S summed), what the FLOPs are spent on
    loss_sum: float = 0.0
    seq_len_sum: float = 0.0
    micro_batches: int = 0

    def add_step(self, *, samples: int, tokens: int, positions: int, loss: float,
                 seq_len_sum: float, micro_batches: int) -> None:
        self.steps += 1
        self.samples += samples
        self.tokens += tokens
        self.positions += positions
        self.loss_sum += loss
        self.seq_len_sum += seq_len_sum
        self.micro_batches += micro_batches

    def rates(self, now_s: float) -> dict[str, float]:
        dt = max(now_s - self.start_s, 1e-9)
        return {
            "loss": self.loss_sum / self.steps if self.steps else float("nan"),
            "samples_per_s": self.samples / dt,
            "tokens_per_s": self.tokens / dt,
            "positions_per_s": self.positions / dt,
            "mean_seq_len": self.seq_len_sum / self.micro_batches if self.micro_batches else 0.0,
        }


def eta_seconds(fraction: float, fraction_at_start: float,
                session_elapsed_s: float) -> float | None:
    """Seconds left at this session's average rate of budget use; None before any progress."""
    done = fraction - fraction_at_start
    if done <= 0:
        return None
    return max(0.0, (1.0 - fraction) * session_elapsed_s / done)
