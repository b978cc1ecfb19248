"""A paper figure as a sweep: a preset, fixed overrides, variants x axes x seeds, evaluation grids.

A sweep file in `sweeps/` declares one `Sweep` and calls `main(SWEEP)`. Each expanded point is one
Tune trial (a Ray Train `TorchTrainer`, see `trial.py`); after training, every final checkpoint is
evaluated on the figure's grids through Ray Data (`grid_eval.py`), into `{storage}/{name}/results`.
The `tiny` preset scales a figure down to CPU-minutes while keeping its axes.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from abacus_ray.config import preset


def standard(layers: int) -> dict[str, Any]:
    """ST: L x 1, the embedding added once before the first layer (official class without the skip flag)."""
    return {"model.layers": layers, "model.recurrences": 1, "model.injection": "first"}


def standard_ii(layers: int) -> dict[str, Any]:
    """ST w/ II: L x 1 with the embedding added before every layer."""
    return {"model.layers": layers, "model.recurrences": 1, "model.injection": "every"}


def looped(layers: int, recurrences: int, injection: str = "every") -> dict[str, Any]:
    """LT: an L-layer block applied R times; addition LTs inject before every layer (spec §4.1)."""
    return {"model.layers": layers, "model.recurrences": recurrences, "model.injection": injection}


# The tiny preset's stand-ins for the paper's three architectures at effective depth 16.
TINY_ARCHS = [standard(2), standard_ii(2), looped(1, 2)]
PAPER_ARCHS = [standard(16), standard_ii(16), looped(1, 16)]
EMBEDDINGS = ["abacus", "fire", "nope"]


@dataclass(frozen=True)
class Flag:
    """A figure-specific command-line flag that sets (or, given a comma list, sweeps) one config key."""

    name: str  # e.g. "--positions"
    key: str  # e.g. "model.positions"
    help: str


@dataclass(frozen=True)
class Scale:
    """What one preset changes: overrides on top of the sweep's `base`, axis values, seeds, grids."""

    overrides: dict[str, Any] = field(default_factory=dict)
    axes: dict[str, list[Any]] | None = None
    variants: list[dict[str, Any]] | None = None
    seeds: int | None = None
    grids: tuple[str, ...] | None = None
    eval_recurrences: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Sweep:
    name: str
    caption: str
    base: dict[str, Any]  # overrides every trial shares (paper values)
    axes: dict[str, list[Any]] = field(default_factory=dict)  # full cross product
    variants: list[dict[str, Any]] = field(default_factory=lambda: [{}])  # explicit alternatives (e.g. L x R)
    seeds: int = 3
    grids: tuple[str, ...] = ("paper-addition",)
    eval_recurrences: tuple[int, ...] = ()  # test-time recurrences to score (empty: the model's own)
    tiny: Scale = field(default_factory=Scale)
    paper: Scale = field(default_factory=Scale)
    flags: tuple[Flag, ...] = ()

    def _scale(self, preset_name: str) -> Scale:
        return {"tiny": self.tiny, "paper": self.paper}.get(preset_name, Scale())

    def scaled(self, preset_name: str) -> tuple[dict[str, Any], dict[str, list[Any]], list[dict[str, Any]], int,
                                                 tuple[str, ...]]:
        s = self._scale(preset_name)
        base = {**self.base, **s.overrides}
        axes = s.axes if s.axes is not None else self.axes
        variants = s.variants if s.variants is not None else self.variants
        seeds = s.seeds if s.seeds is not None else self.seeds
        grids = s.grids if s.grids is not None else self.grids
        return base, axes, variants, seeds, grids

    def trials(self, preset_name: str, *, seeds: int | None = None, extra: dict[str, Any] | None = None,
               axes: dict[str, list[Any]] | None = None) -> list[dict[str, Any]]:
        """The overrides of every trial: variants x axes x seeds, each validated by building its config.

        `axes` replaces or adds axes (figure flags such as `--positions fire,nope`).
        """
        base, own_axes, variants, n_seeds, _ = self.scaled(preset_name)
        axes = {**own_axes, **(axes or {})}
        n_seeds = seeds if seeds is not None else n_seeds
        if n_seeds < 1:
            raise ValueError(f"--seeds: must be >= 1, got {n_seeds}")
        keys = list(axes)
        out = []
        for variant in variants:
            for values in itertools.product(*(axes[k] for k in keys)):
                for seed in range(n_seeds):
                    overrides = {**base, **variant, **dict(zip(keys, values, strict=True)), "seed": seed,
                                 **(extra or {})}
                    preset(preset_name, overrides)  # fail before any trial starts
                    out.append(overrides)
        return out

    def grids_for(self, preset_name: str) -> tuple[str, ...]:
        return self.scaled(preset_name)[4]

    def eval_recurrences_for(self, preset_name: str) -> tuple[int, ...]:
        s = self._scale(preset_name)
        return s.eval_recurrences if s.eval_recurrences is not None else self.eval_recurrences


def trial_name(overrides: dict[str, Any], swept: list[str]) -> str:
    """A short readable trial name from the swept keys, e.g. `max_k=25_seed=0`."""
    parts = [f"{k.rsplit('.', 1)[-1]}={overrides[k]}" for k in swept if k in overrides]
    return "_".join(parts) or "base"


def swept_keys(trials: list[dict[str, Any]]) -> list[str]:
    """Keys whose value differs between trials (the figure's axes, seeds included)."""
    keys: list[str] = []
    for t in trials:
        for k in t:
            if k not in keys:
                keys.append(k)
    return [k for k in keys if len({repr(t.get(k)) for t in trials}) > 1]


def build_parser(sweep: Sweep) -> argparse.ArgumentParser:
    from abacus_ray.cli import ArgumentParser  # one-line usage errors, exit status 2

    p = ArgumentParser(prog=f"sweeps/{sweep.name}.py", description=sweep.caption)
    p.add_argument("--preset", choices=["tiny", "paper"], default="tiny",
                   help="tiny: CPU-minutes per model on a laptop; paper: the paper's setting (GPU cluster)")
    p.add_argument("--seeds", type=int, default=None, help="training seeds per configuration (default: the figure's)")
    p.add_argument("--budget-hours", type=float, default=None,
                   help="training budget per trial in device-hours (GPU-hours on GPUs)")
    p.add_argument("--storage", default="results", help="root directory for trials, checkpoints and Parquet results")
    p.add_argument("--address", default=None,
                   help="Ray cluster address (default: $RAY_ADDRESS, else an embedded local Ray on 127.0.0.1)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="extra config override for every trial (repeatable), e.g. train.max_steps=100")
    p.add_argument("--per-cell", type=int, default=None, help="problems per evaluation cell (default: the preset's)")
    p.add_argument("--grid", dest="grids", action="append", default=None,
                   help="evaluation grid name or spec (repeatable; default: the figure's grids)")
    p.add_argument("--max-trials", type=int, default=None,
                   help="run only the first N trials of the expansion (smoke tests)")
    for flag in sweep.flags:
        p.add_argument(flag.name, default=None, help=f"{flag.help} (sets {flag.key}; a comma list sweeps it)")
    p.add_argument("--no-eval", action="store_true", help="train only")
    p.add_argument("--no-dashboard", action="store_true", help="do not build the dashboards")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs for the embedded local Ray (default: all)")
    return p


def main(sweep: Sweep, argv: list[str] | None = None) -> int:
    """Parse the standard sweep flags, train every trial through Tune, evaluate, build dashboards.

    Every flag is validated before Ray is imported or started: bad input costs no cluster time.
    """
    from abacus_ray.cli import check_output_dir, error_text, parse_args
    from abacus_ray.configuration import parse_set
    from abacus_ray.evaluation.grids import resolve_grid_names

    args = parse_args(build_parser(sweep), argv)
    if isinstance(args, int):  # --help (0) or a one-line usage error (2)
        return args
    try:
        extra: dict[str, Any] = dict(parse_set(s) for s in args.overrides)
        if args.budget_hours is not None:
            extra["train.budget_hours"] = args.budget_hours
        if args.per_cell is not None:
            extra["eval.per_cell"] = args.per_cell
        axes: dict[str, list[Any]] = {}
        for flag in sweep.flags:
            value = getattr(args, flag.name.lstrip("-").replace("-", "_"))
            if value is not None:
                axes[flag.key] = [v.strip() for v in value.split(",") if v.strip()]
                if not axes[flag.key]:
                    raise ValueError(f"{flag.name}: no value in {value!r}; give one value or a comma list")
        trials = sweep.trials(args.preset, seeds=args.seeds, extra=extra, axes=axes)
        if not trials:
            raise ValueError(f"--preset: {args.preset} expands to no trials")
        if args.max_trials is not None:
            if args.max_trials < 1:
                raise ValueError(f"--max-trials: must be >= 1, got {args.max_trials}")
            trials = trials[: args.max_trials]
        if args.num_cpus is not None and args.num_cpus < 1:
            raise ValueError(f"--num-cpus: must be >= 1, got {args.num_cpus}")
        grids = tuple(args.grids) if args.grids else sweep.grids_for(args.preset)
        resolve_grid_names(grids)
        if "://" not in args.storage:
            check_output_dir(args.storage, "--storage")
        from abacus_ray.cluster.driver import run_sweep

        out = run_sweep(sweep.name, args.preset, trials, grids, storage=Path(args.storage), address=args.address,
                        evaluate=not args.no_eval, dashboards=not args.no_dashboard, num_cpus=args.num_cpus,
                        eval_recurrences=sweep.eval_recurrences_for(args.preset))
    except (ValueError, OSError) as e:
        print(f"{sweep.name}: error: {error_text(e)}", file=sys.stderr)
        return 2
    print(f"{sweep.name}: results in {out}")
    return 0
