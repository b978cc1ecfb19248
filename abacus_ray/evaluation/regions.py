"""Regions of an evaluation grid relative to the training length.

Paper §3; the official code's evaluation: docs/official-code.md §7.6-7.7.

Every results row carries one region label, computed when the cell is scored:

* +, -, x, bitwise OR (n = the model's `task.train_max_len`):
  `id` both operands <= n (the red square); `ood` max(i, j) > n and both <= 100
  (docs/official-code.md §7.7's reading of [Q] 7: *at least one* operand longer than n);
  `ood100plus` max(i, j) > 100 (the 101-160 diagonal and the long diagonals).
* sorting (i = max digits d, j = array length m; n_d = `task.train_max_len`,
  n_m = `task.train_max_array`):
  `id` d <= n_d and m <= n_m; `ood_digits` d > n_d, m <= n_m; `ood_array` d <= n_d, m > n_m;
  `ood_both` both larger.

Summary *views* are the numbers the paper reports; each is a predicate over (region, i, j).
Our reading of docs/official-code.md §7.6 [Q] for Tables 1-2 (the rows are not in the official
code): every OOD view excludes the ID block, and the 24..30 corner that the official default skips
is evaluated and counted.
  - `ood_digits_30` "OOD (number length - 30)": d in n_d+1..30, m <= n_m
  - `ood_array_30`  "OOD (array length - 30)":  d <= n_d, m in n_m+1..30
  - `all_ood_30`    "All OOD (30x30)":          every cell of the 30x30 grid except ID
  - `all_ood_20`    "All OOD (20x20)":          every cell with d, m <= 20 except ID
"""

from __future__ import annotations

from collections.abc import Callable

ARITH_REGIONS = ("id", "ood", "ood100plus")
SORT_REGIONS = ("id", "ood_digits", "ood_array", "ood_both")


def region_of(task: str, i: int, j: int, n_train: int, n_train_array: int | None = None) -> str:
    """The region label of cell (i, j) for a model trained on size-`n_train` data."""
    if n_train < 1:
        raise ValueError(f"n_train: must be >= 1, got {n_train}")
    if task == "sort":
        m_train = n_train if n_train_array is None else n_train_array
        long_d, long_m = i > n_train, j > m_train
        if long_d and long_m:
            return "ood_both"
        if long_d:
            return "ood_digits"
        if long_m:
            return "ood_array"
        return "id"
    if max(i, j) <= n_train:
        return "id"
    if max(i, j) <= 100:
        return "ood"
    return "ood100plus"


# A view: name -> predicate(region, i, j) -> bool. Plain functions, so pandas and Ray Data can apply
# them.
View = Callable[[str, int, int], bool]

ARITH_VIEWS: dict[str, View] = {
    "id": lambda r, i, j: r == "id",
    "ood": lambda r, i, j: r == "ood",
    "ood100plus": lambda r, i, j: r == "ood100plus",
}

SORT_VIEWS: dict[str, View] = {
    "id": lambda r, i, j: r == "id",
    "ood_digits_30": lambda r, i, j: r == "ood_digits" and i <= 30,
    "ood_array_30": lambda r, i, j: r == "ood_array" and j <= 30,
    "all_ood_30": lambda r, i, j: r != "id" and i <= 30 and j <= 30,
    "all_ood_20": lambda r, i, j: r != "id" and i <= 20 and j <= 20,
}


def views_for(task: str) -> dict[str, View]:
    """The summary views reported for `task` (sorting has its own, Tables 1-2)."""
    return SORT_VIEWS if task == "sort" else ARITH_VIEWS
