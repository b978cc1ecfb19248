"""A researcher's own mechanisms, added from their own module without editing the package.

Three places where research changes the experiment have a small registry here, which config
validation, the model, the problem generators and `describe` consult beside the built-in choices:

* a **position scheme** (`model.positions`): `register_positions(name, bias)` where `bias(heads)`
  builds a module that maps query and key positions (two 1-D integer tensors) to an additive
  attention bias [heads, queries, keys], as FIRE's does; `name` and `abacus+name` (with the Abacus
  embedding) become choices;
* an **Abacus offset draw** (`model.k_draw`): `register_k_draw(name, weights)` where
  `weights(max_k, longest_digit_run)` gives the probability of each offset 0..max_k;
* a **task** (`task.name`): `register_task(name, problem, longest_line)` where
  `problem(i, j, rng)` writes one problem of cell (i, j) as (prompt, answer) text in the arithmetic
  vocabulary (digits and `+-x=`; the prompt ends with "=", numbers least significant digit first as
  the built-in tasks write them) from `rng`, a `numpy.random.Generator` seeded from the row's own
  random words (so a problem is a pure function of the task, cell, seed and row, and shards draw
  the rows of the unsharded batch), and `longest_line(i, j)` bounds the prompt and answer's
  length (padding, decode limits and the Abacus table read it). Cells are read as the arithmetic
  tasks' (ID up to the training length, OOD beyond).

Claims need no registry: a `CLAIM` in a sweep file of one's own is read as a figure's is.

A plugin is a Python module (a dotted name importable here, or the path of a `.py` file) that
registers at import. The config names the modules it needs (`plugins`, a list of module names): the
command line loads one with `--plugin MODULE_OR_FILE` and adds its name there, building a config
(a checkpoint's too) imports the modules it names first, and a sweep ships the files it loaded to
its Ray workers with the job (`files`, Ray's `runtime_env` `py_modules`). So a checkpoint records
which plugin made it, and reading it where that module cannot be imported is one line naming it.
Pure: no torch, no Ray (the registered callables bring their own).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Bias = Callable[[int], Any]  # heads -> nn.Module: (query positions, key positions) -> [H, Q, K]
Weights = Callable[[int, int], Any]  # (max_k, longest digit run) -> probabilities of 0..max_k
Problem = Callable[[int, int, Any], tuple[str, str]]  # (i, j, numpy Generator) -> (prompt, answer)


@dataclass(frozen=True)
class Task:
    """A registered task: how one problem is written, and how long a line of cell (i, j) can be."""

    problem: Problem
    longest_line: Callable[[int, int], int]


POSITIONS: dict[str, Bias] = {}
K_DRAWS: dict[str, Weights] = {}
TASKS: dict[str, Task] = {}
_FILES: dict[str, Path] = {}  # module name -> the file it was loaded from (shipped to workers)
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def register_positions(name: str, bias: Bias) -> None:
    """Make `name` (and `abacus+name`) a `model.positions` choice whose attention adds `bias`."""
    _check_new(name, "position scheme", ("abacus", "fire", "rope", "nope", "learned"))
    POSITIONS[name] = bias


def register_k_draw(name: str, weights: Weights) -> None:
    """Make `name` a `model.k_draw` choice: offsets drawn with `weights(max_k, longest_run)`."""
    _check_new(name, "offset draw", ("uniform", "balanced"))
    K_DRAWS[name] = weights


def register_task(name: str, problem: Problem, longest_line: Callable[[int, int], int]) -> None:
    """Make `name` a `task.name` choice whose problems `problem(i, j, rng)` writes."""
    _check_new(name, "task", ("add", "sub", "mul", "addsub", "sort", "or"))
    if not callable(problem) or not callable(longest_line):
        raise ValueError(f"a task plugin: {name!r} needs callables problem(i, j, rng) and "
                         "longest_line(i, j)")
    TASKS[name] = Task(problem, longest_line)


def _check_new(name: str, what: str, built_in: tuple[str, ...]) -> None:
    """A plugin's name: new beside the built-in ones (registering it again replaces it)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"a {what} plugin: {name!r} is not a name (lower-case letters, digits, _)")
    if name in built_in:
        raise ValueError(f"a {what} plugin: {name!r} is built in")


def position_bias(positions: str) -> Bias | None:
    """The registered bias of `positions` (`name` or `abacus+name`); None for a built-in scheme."""
    return POSITIONS.get(positions.removeprefix("abacus+"))


def load(given: str, flag: str = "--plugin") -> str:
    """Import a plugin (a dotted module name, or a `.py` file's path) and return its module name,
    the name a config records. One ValueError naming `flag` where it cannot be imported."""
    path = Path(given)
    if given.endswith(".py") or path.is_file():
        if not path.is_file():
            raise ValueError(f"{flag} {given}: no such file")
        name = path.stem
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"{flag} {given}: {name!r} cannot name a module")
        known = _FILES.get(name)
        if known is not None and known != path.resolve():
            raise ValueError(f"{flag} {given}: a plugin named {name} was loaded from {known}")
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except Exception as e:
                del sys.modules[name]
                raise ValueError(f"{flag} {given}: {type(e).__name__}: {e}") from None
        _FILES[name] = path.resolve()
        return name
    ensure([given], flag)
    return given


def ensure(names: Iterable[str], what: str = "plugins") -> None:
    """Import every module in `names` (a config's `plugins`) that is not imported yet; one
    ValueError naming `what` and the module where one cannot be."""
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except Exception as e:
            raise ValueError(f"{what}: needs the plugin module {name!r}, which cannot be imported "
                             f"here ({type(e).__name__}: {e}); give it with --plugin FILE or "
                             "install it") from None


def files() -> list[str]:
    """The plugin files this process loaded by path: what a Ray job ships to its workers."""
    return [str(p) for p in _FILES.values()]
