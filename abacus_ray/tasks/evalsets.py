"""Evaluation sets: the fixed problems of each grid cell, reproducible anywhere.

The official eval sets: docs/official-code.md §3.7.

The official eval files were generated from OS entropy and cannot be regenerated; here a cell's
problems are a pure function of (task, i, j, count, seed), drawn from a word stream keyed on a
SHA-256 of ("eval", task, i, j, seed). So any worker on any machine rebuilds the same cell, cells
are independent of each other (evaluating a sub-grid never shifts another cell), eval sets never
share draws with `generate` or the training stream, and a smaller `count` gives a prefix of a
larger one.

Operands have exactly i and j digits (sorting: max digits i, array length j; bitwise OR: all
min(i, j) problems once count >= min(i, j)). As at the official test time, index-hinted prompts
start their hints at the first symbol ("A") unless `hint_start` says otherwise, and prompts carry
no random padding unless `pad_p` is given.
"""

from __future__ import annotations

from collections.abc import Iterable

from abacus_ray.tasks.formats import Problem
from abacus_ray.tasks.problems import cell_problems

VARIANT_KEYS = ("index_hints", "hint_start", "pad_p")


def eval_problems(task: str, i: int, j: int, count: int, seed: int, **variant) -> list[Problem]:
    """The `count` problems of eval cell (i, j); `variant`: index_hints, hint_start, pad_p."""
    unknown = sorted(set(variant) - set(VARIANT_KEYS))
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown eval-set variant "
                         f"(known: {', '.join(VARIANT_KEYS)})")
    index_hints = variant.get("index_hints", "none")
    hint_start = variant.get("hint_start", 0 if index_hints != "none" else None)
    return cell_problems("eval", task, i, j, count, seed, index_hints=index_hints,
                         hint_start=hint_start, pad_p=variant.get("pad_p", 0.0))


def eval_set(task: str, cells: Iterable[tuple[int, int]], count: int, seed: int,
             **variant) -> dict[tuple[int, int], list[Problem]]:
    """`eval_problems` for several cells, keyed by (i, j)."""
    return {(i, j): eval_problems(task, i, j, count, seed, **variant) for i, j in cells}
