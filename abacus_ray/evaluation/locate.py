"""Where results are: the one reading of a RESULTS argument that every command shares.

A command that reads results (`summary`, `dashboard`) or adds to them (`eval-all`) accepts any of
the three kinds of directory a run leaves (a *results root*), on a local disk or as an object-store
URI:

* a *results directory*: `part-*.parquet` in it (what `abacus-ray eval --out` writes);
* a *sweep root*: the directory a sweep writes (`results/`, `train/`, `sweep.json`), e.g.
  `results/demo/fig10_k`;
* a *storage root*: a directory of sweep roots (a sweep's `--storage`, a bucket prefix).

`results_dirs` lists the results directories a results root holds, for readers; `eval_targets`
pairs each root's checkpoints with the results directory they belong in, for `eval-all`. Both
refuse, in one line naming the argument (`flag`, or with `flag=""` the root itself), a root that
does not exist or holds none.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from abacus_ray import storage
from abacus_ray.evaluation.results import PART_GLOB, part_files
from abacus_ray.storage import Location
from abacus_ray.sweep_dir import SweepDir
from abacus_ray.text import one_line

T = TypeVar("T")

RESULTS_DIR = SweepDir.RESULTS  # a sweep root's results directory


def _directory(loc: Location, flag: str) -> Location:
    """`loc` (resolved, and a URI probed, by the command line) checked to be a directory."""
    if not storage.exists(loc):
        raise FileNotFoundError(f"{_named(flag, loc)}: no such results directory")
    if not storage.is_dir(loc):
        raise NotADirectoryError(f"{_named(flag, loc)}: is not a directory")
    return loc


def _named(flag: str, loc: Location) -> str:
    return f"{flag}: {loc}" if flag else str(loc)


def results_dirs(loc: Location, flag: str = "RESULTS") -> list[Location]:
    """The results directories under `loc`: itself, its `results/` (a sweep root), or every
    `*/results/` (a storage root), in name order."""
    _directory(loc, flag)
    if part_files(loc):
        return [loc]
    if part_files(loc / RESULTS_DIR):
        return [loc / RESULTS_DIR]
    found = [c / RESULTS_DIR for c in storage.listdir(loc)
             if storage.is_dir(c) and part_files(c / RESULTS_DIR)]
    if not found:
        raise ValueError(f"{_named(flag, loc)}: holds no abacus-ray results ({PART_GLOB} in it, "
                         f"in {RESULTS_DIR}/ or in */{RESULTS_DIR}/); run a sweep or "
                         f"`abacus-ray eval CHECKPOINT --out {loc}` first")
    return found


def read_each(dirs: list[Location], read: Callable[[Location], T],
              command: str) -> list[tuple[Location, T]]:
    """`read` of every results directory in `dirs`. Of a storage root's several, one whose data
    cannot be read (a damaged part, a `sweep.json` of the wrong type) is skipped with one line on
    stderr naming it, and the rest are read; a lone one raises, as does a root where none can be."""
    out, skipped = [], []
    for d in dirs:
        try:
            out.append((d, read(d)))
        except (OSError, ValueError, pa.ArrowException) as e:
            if len(dirs) == 1:
                raise
            skipped.append(f"{command}: skipped {d}: {one_line(str(e), 300)}")
    for line in skipped:
        print(line, file=sys.stderr)
    if not out:
        raise ValueError(f"none of the {len(dirs)} results directories could be read")
    return out


@dataclass(frozen=True)
class EvalTarget:
    """Checkpoints to score and the results directory their rows go to. In a sweep (`sweep`), the
    checkpoints its trial record lists (`abacus_ray.trial_status`); elsewhere the latest checkpoint
    of `models` itself or of each run directory directly in it."""

    models: Location
    results: Location
    sweep: bool = False


def _is_sweep(loc: Location) -> bool:
    return SweepDir.of(loc).recorded


def _is_run(loc: Location) -> bool:
    """A training run's directory: it holds numbered `step-*` checkpoints."""
    from abacus_ray.model.checkpoint import is_checkpoint_name  # heavy: torch, only when asked

    return any(is_checkpoint_name(c.name) for c in storage.listdir(loc))


def _at(root: Location, results: Location) -> EvalTarget:
    return EvalTarget(root, results, sweep=_is_sweep(root))


def eval_targets(loc: Location, flag: str = "RESULTS") -> list[EvalTarget]:
    """Where `eval-all TARGET` finds models and writes their results, one target per sweep, never
    above TARGET but for a results directory's own sweep or run: a results directory and the sweep
    root (or training run) it lies in, else itself alone; a sweep root and its `results/`; each
    sweep root of a storage root; any other directory of trained runs (`abacus-ray train --out`
    directories) and its `results/`."""
    _directory(loc, flag)
    if part_files(loc):
        parent = loc.parent
        if parent.path != loc.path and (_is_sweep(parent) or _is_run(parent)):
            return [_at(parent, loc)]
        return [EvalTarget(loc, loc)]  # checkpoints inside it only, if any
    if SweepDir.at(loc) is not None:
        return [_at(loc, SweepDir.of(loc).results)]
    roots = [d for c in storage.listdir(loc) if storage.is_dir(c) and (d := SweepDir.at(c))]
    return [_at(d.root, d.results) for d in roots] or [EvalTarget(loc, loc / RESULTS_DIR)]
