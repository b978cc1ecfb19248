"""Every seed the project derives, in one place: each recipe named, with what it keys on and why.

A run has one integer, the config's `seed`, and an evaluation one, `eval.seed`. Everything random
descends from them through these recipes (what each is keyed on, then what it draws), each keyed
on exactly what must make its draws differ, and on nothing else, so that the same inputs give the
same draws on every machine, process, rank and resume:

* `weights_seed` (run seed): the initial weights, every rank alike;
* `rank_seed` (run seed, rank): a rank's global torch / NumPy / `random` streams (noise);
* `resumed_rank_seed` (run seed, rank, step): the same, for a rank other than 0 resuming from a
  checkpoint without its streams (another world size);
* `micro_batch_generator` (run seed, micro-batch, drawing rank): progressive-loss depth, offset;
* `stable_key` (a domain, the problem's coordinates): the training stream's and the evaluation
  sets' problems (Philox keys); a plugin's task draws from a NumPy Generator seeded with its row's
  first four words (`tasks.problems.plugin_problems`), so it inherits the same keys;
* `cell_seed` (eval seed, task, i, j): a grid cell's initial-state noise at evaluation;
* `validation_seed` (eval seed): the validation score's problems (never the final grid's);
* `search_rng` (the search's seed): which points of a search run, in which order.

The values are frozen: checkpoints, results, model ids and the determinism tests depend on them.

Below the recipes, the global RNG states a checkpoint carries (`rng_state`, `set_rng_state`), so a
resume continues every stream bit-identically. They are stored as tensors and plain numbers, which
`torch.load(weights_only=True)` accepts (no pickled NumPy or Python objects in checkpoints).
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
import torch

# the official code offsets each rank's seeds by 10 * rank (docs/official-code.md §6.8)
RANK_STRIDE = 10
RESUME_STRIDE = 7919  # a prime: a resumed rank's streams start where no earlier step's could
VALIDATION_SHIFT = 1  # validation problems: eval.seed + 1, never the final evaluation's own
_PROBLEMS = "abacus-ray/tasks/v1"  # the namespace of problem keys


def weights_seed(seed: int) -> int:
    """The initial weights: the run seed itself, so every rank builds the same model."""
    return seed


def rank_seed(seed: int, rank: int) -> int:
    """A rank's global RNGs (initial-state noise and anything else drawn globally): the official
    code's seed + 10 x rank, shifted by one so that rank 0's streams differ
    from the weights' draw."""
    return seed + 1 + RANK_STRIDE * rank


def resumed_rank_seed(seed: int, rank: int, step: int) -> int:
    """A rank other than 0 resuming at `step` from a checkpoint that lacks its RNG state (saved by
    another world size): it restarts its streams from (seed, rank, step), away from every stream an
    earlier step used."""
    return rank_seed(seed, rank) + RESUME_STRIDE * step


def micro_batch_generator(seed: int, index: int, rank: int = 0) -> torch.Generator:
    """A CPU generator determined by (seed, micro-batch index, drawing rank) alone, for the draws
    that must not depend on how a run was split into sessions (progressive loss, Abacus offset);
    rank 0's stream does not depend on the world size."""
    words = [seed & 0xFFFFFFFF, seed >> 32 & 0xFFFFFFFF, index, 0xABAC] + ([rank] if rank else [])
    state = np.random.SeedSequence(words).generate_state(2)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


def stable_key(*parts: object) -> int:
    """A 128-bit Philox key from `parts` (str/int/float), identical across processes and machines
    (never Python's salted `hash()`): the problems of the training stream and
    of the evaluation sets."""
    text = "|".join([_PROBLEMS, *(f"{type(p).__name__}:{p!r}" for p in parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:16], "little")


def cell_seed(eval_seed: int, task: str, i: int, j: int) -> int:
    """A 63-bit seed of a grid cell's initial-state noise, depending on the whole (eval seed, task,
    i, j) and nothing else, so that every engine and every packing of cells sees the same noise."""
    digest = hashlib.sha256(f"abacus-ray/noise/{eval_seed}/{task}/{i}/{j}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def validation_seed(eval_seed: int) -> int:
    """The validation score's problems: a validation set, so a search that selects on that score
    never sees the problems the final grid evaluation scores."""
    return eval_seed + VALIDATION_SHIFT


def search_rng(seed: int) -> random.Random:
    """The random sample of a search (`sweep.Search`): the same command draws the same points."""
    return random.Random(seed)


# --- the global RNG states a checkpoint carries ---------------------------------------------

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
