"""Seeding and RNG-state capture, so runs are reproducible and resumes are bit-identical (which seed
each stream gets: `abacus_ray/seeds.py`).

States of torch (CPU and CUDA), NumPy and Python `random` are stored as tensors and plain numbers,
which `torch.load(weights_only=True)` accepts (no pickled NumPy or Python objects in checkpoints).
"""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_all(seed: int) -> None:
    """Seed Python `random`, NumPy and torch (all devices) from one integer."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict:
    """The current global RNG states as weights-only-loadable values."""
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    version, py_internal, py_gauss = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy_keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
        "numpy_pos": int(pos),
        "numpy_has_gauss": int(has_gauss),
        "numpy_gauss": float(gauss),
        "python_version": int(version),
        "python_internal": torch.tensor(py_internal, dtype=torch.int64),
        "python_gauss": py_gauss,
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what `rng_state` captured (CUDA states only where this process has the devices)."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(("MT19937", state["numpy_keys"].numpy().astype(np.uint32),
                         state["numpy_pos"], state["numpy_has_gauss"], state["numpy_gauss"]))
    random.setstate((state["python_version"],
                     tuple(int(x) for x in state["python_internal"].tolist()),
                     state["python_gauss"]))
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)


def every_rank_rng_state(process_group: object | None) -> list[dict]:
    """`rng_state()` of every rank of `process_group`, in rank order (this process's alone without
    one): a collective, so every rank calls it at the same step. A checkpoint keeps them all, so
    each rank of a resumed run continues its own streams (the initial-state noise) where it left
    them."""
    mine = rng_state()
    if process_group is None:
        return [mine]
    import torch.distributed as dist

    out: list = [None] * dist.get_world_size(process_group)
    dist.all_gather_object(out, mine, group=process_group)
    return out
