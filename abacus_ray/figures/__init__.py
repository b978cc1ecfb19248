"""The paper's figures and tables as sweeps: one module per figure, each declaring `SWEEP =
Sweep(...)` whose caption is the figure's (the reproduction of Fig. 10 is
`abacus_ray/figures/fig10_k.py`) and `CLAIM = Claim(...)`, what the figure claims, which a sweep's
results show, contradict or leave undecided (`abacus_ray/evaluation/claims.py`).

They ship inside the package, so an installed `abacus-ray` finds them by name from any directory
(`abacus-ray sweep fig10_k`, `abacus-ray plan --all`); the top-level `sweeps/*.py` are thin scripts
that run them (`python sweeps/fig10_k.py`). A figure is found by importing its module: the package's
own listing is the only catalogue, nothing is registered at run time.
"""

from __future__ import annotations

import importlib
import pkgutil

from abacus_ray.evaluation.claims import Across, Claim
from abacus_ray.sweep import Sweep

CONFIRM = "_confirm"  # a search's confirmation sweep (`--confirm`) is named NAME_confirm


def names() -> tuple[str, ...]:
    """Every figure's sweep name (its module's name), sorted."""
    return tuple(
        sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    )


def figure(name: str) -> Sweep | None:
    """The sweep of figure `name` (e.g. `fig10_k`), or None when no figure has that name."""
    if name not in names():
        return None
    sweep = importlib.import_module(f"{__name__}.{name}").SWEEP
    # a figure module names its sweep as itself
    if not isinstance(sweep, Sweep) or sweep.name != name:
        raise ValueError(f"{__name__}.{name}: declares no SWEEP = Sweep(name={name!r}, ...)")
    return sweep


def claim(name: str) -> Claim | None:
    """The claim of figure `name`'s sweep (that of its search for `NAME_confirm`), or None when no
    figure has that name."""
    base = name.removesuffix(CONFIRM)
    if base not in names():
        return None
    found = getattr(importlib.import_module(f"{__name__}.{base}"), "CLAIM", None)
    if not isinstance(found, Claim):
        raise ValueError(f"{__name__}.{base}: declares no CLAIM = Claim(...)")
    return found


def across(name: str) -> Across | None:
    """The claim figure `name` makes across sweeps (`ACROSS = Across(...)` in its module: its arms
    in its own sweep and in others), or None."""
    if name not in names():
        return None
    found = getattr(importlib.import_module(f"{__name__}.{name}"), "ACROSS", None)
    if found is not None and not isinstance(found, Across):
        raise ValueError(f"{__name__}.{name}: ACROSS is not an Across(...)")
    return found
