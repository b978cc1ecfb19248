"""A paper figure as a sweep: a preset, fixed overrides, variants x axes x seeds, evaluation grids.

A figure's module in `abacus_ray/figures/` (or a sweep file of one's own) declares one `Sweep` whose
caption is the figure's; `Sweep.expand` turns it into `Trial`s once, each holding its fully resolved
`ExperimentConfig` (name = the run's name, eval grids = the figure's). Those objects are what
`abacus-ray sweep --dry-run` prints, what the Ray layer trains (`cluster/driver.py`) and evaluates,
and what `sweep.json` records. Pure: no Ray here.
The `tiny` preset scales a figure down to CPU-minutes while keeping its axes.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any

from abacus_ray import trial_status
from abacus_ray.config import ExperimentConfig, preset
from abacus_ray.config.dicts import flatten
from abacus_ray.seeds import search_rng
from abacus_ray.sweep_dir import SweepDir

# Trials one sweep command may expand to: 10x the largest paper figure's (fig9_data_size, 108 on the
# paper preset). Every trial is a Tune trial with its own directory, checkpoints and MLflow run, and
# the expansion builds and validates every config, so the bound also keeps `--dry-run` quick.
MAX_TRIALS = 1_000
# A CPU-scale sweep's workers each hold 0.98 of a CPU, so that N trials and their Tune drivers
# (`config.cluster.DRIVER_CPU`, 0.01 each) train at once on N cores.
SHARE_CORES = {"cluster.cpus_per_worker": 0.98}
# No wall-clock cap: the schedule follows the step count alone and a rerun trains the same weights
# (the tiny preset's 0.1 device-hour cap leads while start-up time outweighs the first steps:
# docs/fidelity.md, "A killed run, rerun").
STEPS_ONLY = {"train.budget_hours": None}
# What a figure trains at CPU scale unless its module says otherwise: 1,500 steps, no wall-clock
# cap, cores shared (the settings tried: docs/results.md).
CPU_SCALE = {"train.max_steps": 1500, **STEPS_ONLY, **SHARE_CORES}


@dataclass(frozen=True)
class Flag:
    """A figure's own command-line flag: sets (or, given a comma list, sweeps) one config key."""

    name: str  # e.g. "--positions"
    key: str  # e.g. "model.positions"
    help: str


@dataclass(frozen=True)
class Search:
    """Search the axes instead of training their whole cross product (figures/extrapolation_10x.py).

    A random search: `pick` draws `samples` distinct points of the expanded cross product (the
    points of `first` before any random one, then a seeded shuffle), which Tune runs in that order,
    and Ray Tune's ASHA scheduler stops the weaker trials at the step rungs
    grace_steps x reduction^i, ranked by `metric`, a number every training report carries (the
    validation score, `evaluation/validation.py`). Trials that run to the end of their budget are
    evaluated on the
    figure's grids. `--confirm` then retrains the best point with `confirm_seeds` seeds for each
    value of the `compare` axes (e.g. the offset draw).
    """

    samples: int
    grace_steps: int
    reduction: int = 3
    metric: str = "validation"
    first: tuple[dict[str, Any], ...] = ()  # points tried first, e.g. the paper's own setting
    seed: int = 0  # the searcher's random state: the same command draws the same points
    compare: dict[str, list[Any]] = field(default_factory=dict)
    confirm_seeds: int = 3

    def pick(self, pool: list[Trial]) -> list[Trial]:
        """The trials to run, in order: those matching a `first` point, then a seeded sample."""
        if self.samples < 1 or self.grace_steps < 1 or self.reduction < 2:
            raise ValueError("search: needs samples >= 1, grace_steps >= 1, reduction >= 2, "
                             f"got {self}")
        # ASHA stops a trial by ending its Tune actor. A TorchTrainer's worker group then keeps its
        # placement group: Ray Train's cleaner of orphaned groups needs the dashboard's state API,
        # which the embedded Ray does not start (docs/log.md, 2026-11-24).
        if any(t.config.cluster.trainer != "function" for t in pool):
            raise ValueError("cluster.trainer: a search stops trials early, so its trials run in "
                             "their Tune trial (cluster.trainer=function, one worker each); a "
                             "stopped TorchTrainer would keep its workers' resources")
        chosen: list[Trial] = []
        taken: set[str] = set()
        for point in self.first:
            # keys no trial varies (e.g. pinned by `--set`) do not take part in the match
            match = next((t for t in pool if t.name not in taken and all(
                t.params[k] == v for k, v in point.items() if k in t.params)), None)
            if match is None:
                raise ValueError(f"search.first: no point of the sweep has {point}")
            chosen.append(match)
            taken.add(match.name)
        rest = [t for t in pool if t.name not in taken]
        order = search_rng(self.seed).sample(range(len(rest)), len(rest))
        return (chosen + [rest[i] for i in order])[: self.samples]


@dataclass(frozen=True)
class Scale:
    """What one preset changes: overrides on the sweep's `base`, axis values, seeds, grids."""

    overrides: dict[str, Any] = field(default_factory=dict)
    axes: dict[str, list[Any]] | None = None
    variants: list[dict[str, Any]] | None = None
    seeds: int | None = None
    grids: tuple[str, ...] | None = None
    eval_recurrences: tuple[int, ...] | None = None
    search: Search | None = None


@dataclass(frozen=True)
class Trial:
    """One point of a sweep: its resolved config and the swept values Tune shows for it."""

    config: ExperimentConfig  # `name` is the run's name, e.g. fig10_k/max_k=25_seed=0
    # swept key -> resolved value (Tune's param space, the status table's columns)
    params: dict[str, Any]

    @property
    def name(self) -> str:
        return self.config.name


@dataclass(frozen=True)
class Sweep:
    name: str
    caption: str
    base: dict[str, Any]  # overrides every trial shares (paper values)
    axes: dict[str, list[Any]] = field(default_factory=dict)  # full cross product
    # explicit alternatives (e.g. L x R)
    variants: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    seeds: int = 3
    grids: tuple[str, ...] | None = None  # evaluation grids (set as eval.grids); None: the preset's
    # test-time recurrences to score (empty: the model's own)
    eval_recurrences: tuple[int, ...] = ()
    tiny: Scale = field(default_factory=Scale)
    paper: Scale = field(default_factory=Scale)
    flags: tuple[Flag, ...] = ()
    search: Search | None = None  # None: train every point of the cross product

    def scale(self, preset_name: str) -> Scale:
        return {"tiny": self.tiny, "paper": self.paper}.get(preset_name, Scale())

    def search_for(self, preset_name: str) -> Search | None:
        s = self.scale(preset_name)
        return s.search if s.search is not None else self.search

    def confirmation(self, preset_name: str, best: dict[str, Any]) -> Sweep:
        """The sweep that retrains the search's `best` point (swept key -> value) with
        `confirm_seeds` seeds for every value of the search's `compare` axes, as a plain sweep
        `NAME_confirm`."""
        search = self.search_for(preset_name)
        if search is None:
            raise ValueError(f"--confirm: sweep {self.name} has no search to confirm")
        s = self.scale(preset_name)
        fixed = {k: v for k, v in best.items() if k not in search.compare and k != "seed"}
        scale = dataclasses.replace(s, overrides={**s.overrides, **fixed},
                                    axes=dict(search.compare), variants=None,
                                    seeds=search.confirm_seeds, search=None)
        return dataclasses.replace(self, name=f"{self.name}_confirm", axes={}, variants=[{}],
                                   search=None, **{preset_name: scale})

    def eval_recurrences_for(self, preset_name: str) -> tuple[int, ...]:
        s = self.scale(preset_name)
        return s.eval_recurrences if s.eval_recurrences is not None else self.eval_recurrences

    def expand(self, preset_name: str, *, seeds: int | None = None,
               overrides: dict[str, Any] | None = None, axes: dict[str, list[Any]] | None = None,
               grids: tuple[str, ...] | None = None) -> list[Trial]:
        """Every trial of the sweep: variants x axes x seeds, each config built (so validated) once.

        `overrides` apply to every trial (`--set`, `--budget-hours`); `axes` replace or add axes
        (figure flags such as `--positions fire,nope`); `grids` replace the figure's evaluation
        grids.
        """
        s = self.scale(preset_name)
        base = {**self.base, **s.overrides}
        all_axes = {**(s.axes if s.axes is not None else self.axes), **(axes or {})}
        # `--set` pins an axis
        all_axes = {k: v for k, v in all_axes.items() if k not in (overrides or {})}
        variants = s.variants if s.variants is not None else self.variants
        n_seeds = seeds if seeds is not None else s.seeds if s.seeds is not None else self.seeds
        if n_seeds < 1:
            raise ValueError(f"--seeds: must be >= 1, got {n_seeds}")
        grids = grids or (s.grids if s.grids is not None else self.grids)
        keys = list(all_axes)
        _check_trial_count(len(variants), [len(all_axes[k]) for k in keys], n_seeds)
        points = [{**base, **variant, **dict(zip(keys, values, strict=True)), "seed": seed,
                   **(overrides or {})}
                  for variant in variants
                  for values in itertools.product(*(all_axes[k] for k in keys))
                  for seed in range(n_seeds)]
        swept = swept_keys(points)
        configs: list[ExperimentConfig] = []
        for point in points:
            cfg = preset(preset_name,
                         point if grids is None else {**point, "eval.grids": list(grids)})
            configs.append(cfg.replace(name=f"{self.name}/{trial_name(point, swept)}"))
        configs = list(dict.fromkeys(configs))  # variants that `--set` made equal run once
        flat = [flatten(c.to_dict()) for c in configs]
        shown = ([k for k in flat[0] if k != "name" and len({repr(f[k]) for f in flat}) > 1]
                 if flat else [])
        return [Trial(c, {k: f[k] for k in shown}) for c, f in zip(configs, flat, strict=True)]


def _check_trial_count(variants: int, axis_sizes: list[int], seeds: int) -> None:
    """Refuse a cross product beyond MAX_TRIALS before any of it is built, naming its cause."""
    points = variants * math.prod(axis_sizes)
    if points * seeds > MAX_TRIALS:
        culprit = "--seeds" if seeds > 1 and points <= MAX_TRIALS else "the sweep's axes"
        raise ValueError(f"{culprit}: {points:,} configurations x {seeds:,} seeds = "
                         f"{points * seeds:,} trials, beyond the bound of {MAX_TRIALS:,} trials "
                         "per sweep")


def best_point(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The swept values of the best trial that ran its whole budget, from `search.parquet`'s rows
    (cluster/search.py): the highest last validation score, ties to the earlier-run trial."""
    finished = [r for r in rows if r["status"] == trial_status.FINISHED and r["last"] is not None]
    if not finished:
        raise ValueError(f"{SweepDir.SEARCH}: no trial of the search ran its whole budget; "
                         "nothing to confirm")
    best = max(enumerate(finished), key=lambda ir: (ir[1]["last"], -ir[0]))[1]
    return json.loads(best["params"])


def single(name: str, preset_name: str, overrides: dict[str, Any]) -> list[Trial]:
    """A one-trial sweep (`NAME/base`) from a preset and overrides: tests, benchmarks, one-offs."""
    return Sweep(name=name, caption=name, base={}, seeds=1).expand(preset_name, overrides=overrides)


def trial_name(overrides: dict[str, Any], swept: list[str]) -> str:
    """A short readable trial name from the swept keys, e.g. `max_k=25_seed=0`."""
    parts = [f"{k.rsplit('.', 1)[-1]}={overrides[k]}" for k in swept if k in overrides]
    return "_".join(parts) or "base"


def swept_keys(points: list[dict[str, Any]]) -> list[str]:
    """Override keys whose value differs between points (the figure's axes, seeds included)."""
    keys: list[str] = []
    for t in points:
        for k in t:
            if k not in keys:
                keys.append(k)
    return [k for k in keys if len({repr(t.get(k)) for t in points}) > 1]
