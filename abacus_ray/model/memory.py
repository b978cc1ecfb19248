"""Will it fit? A lower bound on the memory a training run or an evaluation needs, checked against
the device's memory before any model is built, so a model or a batch too big for the machine is one
line naming the setting (exit 2) instead of an allocation that the kernel kills.

The estimates count only what must exist at once, so they never exceed the real need (a run refused
here could never have run; one allowed may still be tight):

* training: fp32 weights, their gradients and AdamW's two moments (16 bytes a parameter), plus one
  micro-batch's activations: for every layer application that carries gradient, each token keeps at
  least its layer input, attention output and feed-forward input (3 x hidden) and the GLU's input
  (intermediate), in 2-byte (bf16) units, plus its fp32 logits;
* evaluation: fp32 weights, the largest cell's seeded initial-state noise (problems x length x
  hidden fp32 on the model's device, `evaluation/noise.py`) and one batch's logits; on the host, the
  cell's token ids as Python lists (two 8-byte references a token).

The device's memory is its total (psutil for the CPU's RAM, `torch.cuda.mem_get_info` for a GPU):
what other processes hold changes by the second, the total does not.
"""

from __future__ import annotations

import functools

import psutil
import torch

from abacus_ray.config import ExperimentConfig, ModelConfig
from abacus_ray.model.transformer import ArithmeticTransformer
from abacus_ray.tasks.tokenizer import get_tokenizer

GIB = float(1 << 30)
MIN_VOCAB = 19  # the smallest vocabulary (digits, operators, specials): a logits row's least width


def device_memory(device: torch.device | str) -> int:
    """Total bytes of `device`: the machine's RAM for the CPU, the GPU's memory for CUDA."""
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return int(torch.cuda.mem_get_info(index)[1])
    return int(psutil.virtual_memory().total)


def num_params(cfg: ExperimentConfig) -> int:
    """The model's parameter count, from a model built on the meta device (no memory allocated)."""
    return meta_model(cfg).num_params()


def meta_model(cfg: ExperimentConfig):
    """`cfg`'s model on the meta device (shapes only, no memory), built once per architecture and
    vocabulary: building one still takes time, and a whole reproduction's plan asks hundreds of
    times (docs/performance.md, "Planning a reproduction")."""
    return _meta_model(cfg.model, get_tokenizer(cfg.task.tokenizer_name).vocab_size)


@functools.lru_cache(maxsize=256)
def _meta_model(model_cfg: ModelConfig, vocab_size: int):
    with torch.device("meta"):
        return ArithmeticTransformer(model_cfg, vocab_size)


def _gib(n: float) -> str:
    return f"{n / GIB:,.1f} GiB"


def _refuse(key: str, what: str, need: float, device: torch.device | str, have: int) -> None:
    raise ValueError(f"{key}: {what} needs at least {_gib(need)}, beyond the {_gib(have)} of "
                     f"{torch.device(device).type} memory on this machine")


def check_training_fits(cfg: ExperimentConfig, device: torch.device | str, grad_recurrences: int,
                        seq_len: int) -> None:
    """Refuse a model whose training state, or a micro-batch whose activations, cannot fit `device`.

    `grad_recurrences`: block applications that carry gradient (the progressive loss's M);
    `seq_len`: tokens of a training sample (`tasks.stream.padded_length`)."""
    m = cfg.model
    have = device_memory(device)
    params = num_params(cfg)
    state = 16.0 * params
    if state > have:
        _refuse("model", f"training a {params:,}-parameter model (weights, gradients, AdamW state)",
                state, device, have)
    tokens = cfg.train.micro_batch * seq_len
    per_token = (2.0 * (3 * m.hidden + m.intermediate) * m.layers * grad_recurrences
                 + 4.0 * MIN_VOCAB)
    need = state + tokens * per_token
    if need > have:
        _refuse("train.micro_batch", f"a micro-batch of {cfg.train.micro_batch:,} samples of "
                f"{seq_len:,} tokens on this {params:,}-parameter model", need, device, have)


def check_eval_fits(cfg: ExperimentConfig, device: torch.device | str, *, rows: int, length: int,
                    token_budget: int, key: str = "eval.per_cell") -> None:
    """Refuse an evaluation whose largest cell (`rows` problems of up to `length` tokens) cannot
    fit: the weights and the cell's noise on `device`, its token ids in the host's memory."""
    have = device_memory(device)
    params = num_params(cfg)
    noisy = cfg.model.init_state == "noise" and cfg.model.init_std > 0
    host = 16.0 * rows * length
    cpu = torch.device(device).type == "cpu"
    need = (4.0 * params + (4.0 * rows * length * cfg.model.hidden if noisy else 0)
            + 4.0 * token_budget * MIN_VOCAB + (host if cpu else 0))
    if need > have:
        _refuse(key, f"scoring {rows:,} problems of {length:,} tokens on this {params:,}-parameter "
                "model", need, device, have)
    if not cpu and host > device_memory("cpu"):
        _refuse(key, f"holding {rows:,} problems of {length:,} tokens", host, "cpu",
                device_memory("cpu"))
