"""Bitwise OR of a one-hot vector and a zero vector (paper A.3; docs/official-code.md §2.5).

Cell (i, j) holds exactly min(i, j) problems, one per one-hot index t in 0..min(i, j)-1:

    i < j: U is the length-i one-hot with its 1 at t, V is j zeros;   e.g. "001+00000=" -> "00100"
    i > j: U is i zeros, V the length-j one-hot;
    i = j: a fair coin decides which operand holds the one-hot.

The answer W is the length-max(i, j) one-hot at t. The operator is written '+', as in the official
data; vectors are left-aligned as written (no reversal applies). Word layout of one row: words[0]
the one-hot index (when sampled), words[1] the coin. Padding reads `pad_words`.
"""

from __future__ import annotations

import numpy as np

from abacus_ray.tasks.formats import Problem, pad_with_counts, padding_counts
from abacus_ray.tasks.randomness import bounded

FIXED_WORDS = 2


def max_line_length(i: int, j: int) -> int:
    return i + 1 + j + 1 + max(i, j)


def words_needed(i: int, j: int) -> int:
    return FIXED_WORDS


def _one_hot(length: int, t: int) -> str:
    return "0" * t + "1" + "0" * (length - t - 1)


def or_problems(i: int, j: int, words: np.ndarray, *, exhaustive: bool = False,
                pad_p: float = 0.0, pad_words: np.ndarray | None = None) -> list[Problem]:
    """One OR problem per row of `words`: one-hot index drawn uniformly, or t = row if `exhaustive`.

    With `exhaustive`, `words` must have exactly min(i, j) rows and the result lists the whole cell.
    """
    k = min(i, j)
    rows = words.shape[0]
    if exhaustive:
        if rows != k:
            raise ValueError(f"words: exhaustive cell ({i}, {j}) needs {k} rows, got {rows}")
        indices = list(range(k))
    else:
        indices = bounded(words[:, 0], k).astype(np.int64).tolist()
    coins = bounded(words[:, 1], 2).tolist()
    pad_counts = padding_counts(pad_words, pad_p) if pad_p > 0 else None
    out = []
    for r, t in enumerate(indices):
        u_holds_one = i < j or (i == j and coins[r] == 0)
        u = _one_hot(i, t) if u_holds_one else "0" * i
        v = "0" * j if u_holds_one else _one_hot(j, t)
        problem = Problem(f"{u}+{v}=", _one_hot(max(i, j), t))
        if pad_counts is not None:
            problem = pad_with_counts(problem, pad_counts[r])
        out.append(problem)
    return out
