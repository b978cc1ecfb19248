"""Evaluation grids: which (i, j) operand-length cells a model is scored on.

The official grids: docs/official-code.md §3.7-3.8, §7.2-7.6.

A cell is `(task, i, j)`: for +, -, x and bitwise OR, i and j are the digit counts of the first and
second operand (heatmap row and column, docs/official-code.md §8.1); for sorting, i is the maximum
number of digits and j the array length. A grid is a named, ordered set of cells. Every paper grid
has one name here; custom rectangles and diagonals come from specs such as `1-20x1-20` and
`101-160`.
Grids that name no task (custom specs) take the task of the checkpoint they are run against.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from abacus_ray.config.bounds import MAX_LENGTH
from abacus_ray.config.dicts import shown
from abacus_ray.config.task import EVAL_TASKS, task_names


class Cell(NamedTuple):
    """One heatmap cell: each of its problems has an exactly-i-digit and an exactly-j-digit
    operand."""

    task: str
    i: int
    j: int


@dataclass(frozen=True)
class Grid:
    """A named ordered set of (i, j) pairs, optionally bound to one task."""

    name: str
    pairs: tuple[tuple[int, int], ...]
    task: str | None = None  # None: the checkpoint's task decides

    def __post_init__(self) -> None:
        if self.task is not None and self.task not in task_names():
            raise ValueError(f"grid {self.name!r}: unknown task {self.task!r}")
        if not self.pairs:
            raise ValueError(f"grid {self.name!r}: has no cells")

    def __len__(self) -> int:
        return len(self.pairs)

    def cells(self, model_task: str) -> list[Cell]:
        """The grid's cells for a model trained on `model_task`.

        An `addsub` model is scored on both + and - when the grid names no task.
        """
        tasks = eval_tasks_for(model_task, self.task, grid_name=self.name)
        return [Cell(t, i, j) for t in tasks for (i, j) in self.pairs]

    def __add__(self, other: Grid) -> Grid:
        if self.task != other.task:
            raise ValueError(f"grid: cannot join {self.name!r} ({self.task}) and "
                             f"{other.name!r} ({other.task})")
        return Grid(f"{self.name}+{other.name}", _unique(self.pairs + other.pairs), self.task)


def eval_tasks_for(model_task: str, grid_task: str | None, *, grid_name: str = "grid",
                   trained: str = "the checkpoint was trained on",
                   instead: str = "a --cells/--diagonal spec") -> tuple[str, ...]:
    """Which problem tasks a `model_task` model can be scored on for a grid of `grid_task`
    (`trained` and `instead` word the refusal for the caller: a checkpoint, or a sweep)."""
    allowed = EVAL_TASKS.get(model_task, (model_task,))
    if grid_task is None:
        return allowed
    if grid_task not in allowed:
        raise ValueError(f"grid: {grid_name!r} holds {grid_task!r} problems, but {trained} "
                         f"{model_task!r}; choose a grid for {', '.join(allowed)} or {instead}")
    return (grid_task,)


def _unique(pairs) -> tuple[tuple[int, int], ...]:
    seen: dict[tuple[int, int], None] = {}
    for p in pairs:
        seen.setdefault((int(p[0]), int(p[1])), None)
    return tuple(seen)


def rectangle(i_range: range, j_range: range) -> tuple[tuple[int, int], ...]:
    """Row-major cells of i_range x j_range (the official loop order, official-code.md §7.2)."""
    return tuple((i, j) for i in i_range for j in j_range)


def diagonal(lengths) -> tuple[tuple[int, int], ...]:
    return tuple((n, n) for n in lengths)


# --- spec parsing ------------------------------------------------------------------------------

_NUM = r"([0-9]{1,18})"  # ASCII digits only; longer numbers are beyond any bound below anyway
_RANGE = re.compile(rf"^\s*{_NUM}\s*(?:-\s*{_NUM}\s*(?::\s*{_NUM}\s*)?)?$")
# Bounds that keep a typo (`1-1000000000`) from materialising billions of cells: far beyond any
# length a transformer here can be scored on (the paper stops at 1000 digits, 10,060 cells a grid);
# MAX_LENGTH (config/bounds.py) also bounds the training length.
MAX_CELLS = 1_000_000


def parse_lengths(spec: str, key: str = "--diagonal") -> list[int]:
    """`"101-160"`, `"200-1000:100"`, `"13,15,20"` or a mix -> sorted-as-given unique lengths
    >= 1."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"{key}: empty length spec; expected e.g. 101-160, 200-1000:100 or "
                         "13,15,20")
    out: list[int] = []
    for part in spec.split(","):
        m = _RANGE.match(part)
        if not m:
            raise ValueError(f"{key}: cannot read {shown(part.strip())} in {shown(spec)}; "
                             "expected N, A-B or A-B:STEP with positive integers, e.g. 101-160")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        step = int(m.group(3)) if m.group(3) else 1
        if lo < 1:
            raise ValueError(f"{key}: lengths must be >= 1, got {lo} in {shown(spec)}")
        if hi < lo:
            raise ValueError(f"{key}: range {shown(part.strip())} is empty (end {hi} < start {lo})")
        if step < 1:
            raise ValueError(f"{key}: step must be >= 1, got {step} in {shown(spec)}")
        if hi > MAX_LENGTH:
            raise ValueError(f"{key}: length {hi} in {shown(spec)} is beyond the limit of "
                             f"{MAX_LENGTH:,} digits")
        out.extend(range(lo, hi + 1, step))
        if len(out) > MAX_CELLS:
            raise ValueError(f"{key}: {shown(spec)} lists more than {MAX_CELLS:,} lengths")
    return list(dict.fromkeys(out))


def parse_cells(spec: str) -> Grid:
    """`"1-20x1-20"` (rectangle), `"5x7"`, `"1-20x5"`; several rectangles joined by `+`."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("--cells: empty spec; expected ROWSxCOLS, e.g. 1-20x1-20")
    pairs: list[tuple[int, int]] = []
    for rect in spec.split("+"):
        parts = rect.lower().split("x")
        if len(parts) != 2:
            raise ValueError(f"--cells: {shown(rect.strip())} is not ROWSxCOLS "
                             "(e.g. 1-20x1-20 or 5x7)")
        rows = parse_lengths(parts[0], "--cells")
        cols = parse_lengths(parts[1], "--cells")
        if len(pairs) + len(rows) * len(cols) > MAX_CELLS:
            raise ValueError(f"--cells: {shown(spec)} holds more than {MAX_CELLS:,} cells")
        pairs.extend((i, j) for i in rows for j in cols)
    return Grid(f"cells:{spec.strip()}", _unique(pairs))


def parse_diagonal(spec: str) -> Grid:
    return Grid(f"diagonal:{spec.strip()}", diagonal(parse_lengths(spec, "--diagonal")))


# --- named grids ---------------------------------------------------------------------------------

def _named() -> dict[str, Grid]:
    square100 = rectangle(range(1, 101), range(1, 101))
    over100 = diagonal(range(101, 161))  # docs/official-code.md §3.7: i = j in 101..160
    # docs/official-code.md §3.7 "googol" groups: 200, 300, ..., 1000
    long_diag = diagonal(range(200, 1001, 100))
    return {
        "paper-addition": Grid("paper-addition", square100 + over100, "add"),
        "paper-addition-long": Grid("paper-addition-long", long_diag, "add"),
        "paper-subtraction": Grid("paper-subtraction", square100 + over100, "sub"),
        "paper-multiplication": Grid("paper-multiplication",
                                     rectangle(range(1, 26), range(1, 26)), "mul"),
        # max digits d (row) x array length m (column); the whole 30x30, corner included
        # (docs/official-code.md §7.6).
        "paper-sorting": Grid("paper-sorting", rectangle(range(1, 31), range(1, 31)), "sort"),
        # the official eval loop covers up to 40x40 (docs/official-code.md §3.7-3.8).
        "paper-or": Grid("paper-or", rectangle(range(1, 41), range(1, 41)), "or"),
        # the 100+ region alone, for any + or - model (`abacus-ray eval-all`'s default,
        # `make eval-100plus`)
        "paper-100plus": Grid("paper-100plus", over100),
        # the CPU `tiny` preset trains on n = 5: a 12x12 square and the 13..20 diagonal.
        "tiny-addition": Grid("tiny-addition",
                              rectangle(range(1, 13), range(1, 13)) + diagonal(range(13, 21)),
                              "add"),
    }


GRIDS: dict[str, Grid] = _named()


def get_grid(name: str) -> Grid:
    """A named grid (see `GRIDS`)."""
    try:
        return GRIDS[name]
    except KeyError:
        raise ValueError(f"--grid: unknown grid {shown(name)}; "
                         f"choose one of {', '.join(GRIDS)}") from None


def resolve_grid(*, grid: str | None = None, cells: str | None = None,
                 diagonal_spec: str | None = None, default: tuple[str, ...] = ()) -> Grid:
    """The grid named by exactly one of `grid`, `cells`, `diagonal_spec`; else the join of the
    `default` names."""
    given = [x for x in (grid, cells, diagonal_spec) if x is not None]
    if len(given) > 1:
        raise ValueError("--grid: give only one of --grid, --cells, --diagonal")
    if grid is not None:
        return grid_from_string(grid)  # a name, or the sweeps' cells:SPEC / diagonal:SPEC forms
    if cells is not None:
        return parse_cells(cells)
    if diagonal_spec is not None:
        return parse_diagonal(diagonal_spec)
    if not default:
        raise ValueError("--grid: no grid given; use --grid NAME, --cells 1-20x1-20 or "
                         "--diagonal 101-160")
    out = get_grid(default[0])
    for name in default[1:]:
        out = out + get_grid(name)
    return out


def grid_from_string(text: str) -> Grid:
    """One grid from a sweep's or CLI's string: a name (`paper-addition`), `cells:1-20x1-20` or
    `diagonal:101-160`."""
    kind, sep, spec = text.partition(":")
    if not sep:
        return get_grid(text)
    if kind == "cells":
        return parse_cells(spec)
    if kind == "diagonal":
        return parse_diagonal(spec)
    raise ValueError(f"--grid: {shown(text)} is not a grid name, cells:SPEC or diagonal:SPEC")


def resolve_grid_names(names: Sequence[str]) -> list[Grid]:
    """Grids from strings (see `grid_from_string`); at least one."""
    if not names:
        raise ValueError("--grid: no grid given")
    return [grid_from_string(n) for n in names]
