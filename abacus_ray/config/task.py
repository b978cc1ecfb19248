"""`TaskConfig`: which problems a model trains on (docs/official-code.md §2-3)."""

from __future__ import annotations

from dataclasses import dataclass

from abacus_ray import plugins
from abacus_ray.config import bounds
from abacus_ray.config.dicts import check, check_choice

TASKS = ("add", "sub", "mul", "addsub", "sort", "or")
HINTS = ("none", "cyclic", "noncyclic")


def task_names() -> tuple[str, ...]:
    """The built-in tasks and those registered by plugins (`plugins.register_task`)."""
    return TASKS + tuple(plugins.TASKS)


@dataclass(frozen=True)
class TaskConfig:
    """The training distribution.

    `train_max_len` is the n of "size-n data": operands of 1..n digits for +, -, x, bitwise OR;
    for sorting it is the maximum number of digits, and `train_max_array` the maximum array length.
    """

    name: str = "add"
    train_max_len: int = 20
    train_max_array: int = 10
    pad_p: float = 0.0  # random padding probability (docs/official-code.md §2.3, Fig. 20)
    index_hints: str = "none"  # none | cyclic | noncyclic (docs/official-code.md §2.4, Fig. 21)

    def __post_init__(self) -> None:
        check_choice(self.name, "task.name", task_names())
        check(self.train_max_len >= 1, "task.train_max_len",
              f"must be >= 1, got {self.train_max_len}")
        check(self.train_max_array >= 1, "task.train_max_array",
              f"must be >= 1, got {self.train_max_array}")
        bounds.check_at_most(self.train_max_len, bounds.MAX_LENGTH, "task.train_max_len")
        bounds.check_at_most(self.train_max_array, bounds.MAX_ARRAY, "task.train_max_array")
        check(0.0 <= self.pad_p < 1.0, "task.pad_p", f"must be in [0, 1), got {self.pad_p}")
        check_choice(self.index_hints, "task.index_hints", HINTS)
        check(self.index_hints == "none" or self.name in ("add", "sub", "addsub"),
              "task.index_hints", f"index hints apply to + and - only, not task {self.name!r}")

    @property
    def tokenizer_name(self) -> str:
        if self.name == "sort":
            return "sort"
        return "index" if self.index_hints != "none" else "pad"

    @property
    def longest_digit_run(self) -> int:
        """Longest run of digit tokens in a training sample: what the Abacus table must cover."""
        n = self.train_max_len
        return max(longest_digit_run(t, n, n, self.index_hints)
                   for t in EVAL_TASKS.get(self.name, (self.name,)))


# A model trained on `addsub` is scored on + and - cells separately.
EVAL_TASKS = {"addsub": ("add", "sub")}


def longest_digit_run(task: str, i: int, j: int, index_hints: str = "none") -> int:
    """Longest run of digit tokens in a problem of cell (i, j) of `task` (operands of i and j
    digits; for sorting i digits per number): the Abacus rows it needs at offset k = 0, row 0 not
    counted."""
    if index_hints != "none":
        return 1  # every digit is preceded by a hint symbol
    if task in plugins.TASKS:  # a plugin's task: its longest line bounds every run in it
        return plugins.TASKS[task].longest_line(i, j)
    return {"add": max(i, j) + 1, "sub": max(i, j), "mul": i + j, "or": max(i, j), "sort": i}[task]
