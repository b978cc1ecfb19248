"""A sweep's identity: which config fields make its trials what they are, and what a rerun may
change.

A sweep records its preset and every trial's resolved config in `sweep.json`; a rerun resumes it
only if it describes the same training. The comparison (`sweep_change`) reads both records as flat
`section.key` dicts and:

* leaves out `EXECUTION_ONLY`: fields that change how or how fast a trial runs, not the model,
  data, schedule or evaluation (a rerun after one of them changed resumes, on the new value);
* reads a key under its former name (`dicts.RENAMED`) as today's;
* reads a key that an older `sweep.json` lacks as the value its version behaved as
  (`OLD_DEFAULTS`), else as today's default (a key added with a default that keeps the old
  behaviour);
* ignores `train.worker_draws` in a one-worker trial, which draws the same either way;
* compares `cluster.cpus_per_worker` by the torch threads it gives a worker (Ray sets
  `OMP_NUM_THREADS` to its floor, at least 1): the thread count changes how a CPU sums floats, so
  the model, while 0.98 and 1.0 CPU train the same one;
* compares a field left to the cluster (`DECIDED_ON_RAY`) only once it is decided.

A rerun may grow a sweep (`sweep_extension`): add trials (more seeds, more values on an axis),
score kept trials on more grids (`eval.grids`, a superset) or train them further (a larger
`train.max_steps`). Anything else that differs, a trial left out included, is named, old -> new,
with how to proceed.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Any

from abacus_ray.config.dicts import flatten, renamed
from abacus_ray.config.experiment import ExperimentConfig

EXECUTION_ONLY = frozenset({
    "train.compile",  # eager or compiled kernels (compiled batches padded): the same training
    "train.report_every_s",  # how often metrics reach Tune
    "train.checkpoint_every_min",  # how often a checkpoint is kept; a resume from any is exact
    # what a worker holds (compared by the threads it gives: `worker_threads`), where it is placed,
    # when a wait is reported: none of these reaches the training loop
    "cluster.cpus_per_worker",
    "cluster.placement",
    "cluster.resources",
    "cluster.wait_warn_s",
})

# Not a config key: the torch threads `cluster.cpus_per_worker` gives a worker, compared instead
THREADS = "cluster.worker_threads"

# Fields an unset value leaves to the cluster (`cluster/devices.py`): before Ray starts they are
# not compared yet; the driver's check sees them decided.
DECIDED_ON_RAY = frozenset({"cluster.use_gpu"})

# Keys added after the first sweep.json, whose absence means a behaviour other than today's default.
OLD_DEFAULTS: dict[str, Any] = {
    "train.budget_a4000_hours": None,  # the budget was train.budget_hours alone
    "train.worker_draws": "shared",  # one offset and depth per global micro-batch
    "eval.hint_scoring": "strict",  # index hints checked too
}


@functools.cache
def _defaults() -> dict[str, Any]:
    return flatten(ExperimentConfig().to_dict())


def trained_fields(config: dict[str, Any], *, recorded: bool = False) -> dict[str, Any]:
    """A trial's config (a nested dict, as `sweep.json` holds it) reduced to what identifies it;
    `recorded`: it comes from a `sweep.json`, whose missing keys take their old defaults."""
    flat = renamed(flatten(config))
    if recorded:
        flat = {**_defaults(), **OLD_DEFAULTS, **flat}
    if flat.get("cluster.workers") == 1:
        flat.pop("train.worker_draws", None)
    if "cluster.cpus_per_worker" in flat:
        flat[THREADS] = worker_threads(flat["cluster.cpus_per_worker"])
    return {k: v for k, v in flat.items() if k not in EXECUTION_ONLY}


def _recorded(config: dict[str, Any], key: str) -> Any:
    return {**_defaults(), **renamed(flatten(config))}.get(key)


def worker_threads(cpus_per_worker: Any) -> Any:
    """The torch threads of a training worker holding `cpus_per_worker` CPUs: Ray's
    `OMP_NUM_THREADS`, the floor of its CPUs and at least 1."""
    if isinstance(cpus_per_worker, (int, float)) and math.isfinite(cpus_per_worker):
        return max(math.floor(cpus_per_worker), 1)
    return cpus_per_worker


def _shown(value: Any) -> str:
    return json.dumps(value)


# What a rerun may grow in a trial it keeps (an extension): more evaluation grids, more steps
GRIDS, STEPS = "eval.grids", "train.max_steps"


@dataclasses.dataclass(frozen=True)
class Extension:
    """How a rerun grows a recorded sweep: trials it adds (more seeds, more values on an axis),
    trials it scores on more grids, trials it trains further (more steps). Nothing else may
    change; an empty extension is the same sweep."""

    added: tuple[str, ...] = ()
    grids: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.grids or self.steps)

    @property
    def trains(self) -> bool:
        """Whether it trains anything: added trials, or trials trained further."""
        return bool(self.added or self.steps)

    def words(self) -> str:
        parts = [f"{len(self.added)} new trial(s) (e.g. {self.added[0]})"] if self.added else []
        parts += [f"{len(self.steps)} trial(s) trained further"] if self.steps else []
        parts += [f"{len(self.grids)} trial(s) scored on more grids"] if self.grids else []
        return ", ".join(parts)


def _grown(key: str, before: Any, after: Any) -> bool:
    """Whether `after` grows `before` in a way an extension may: more grids, more steps."""
    if key == GRIDS:
        return isinstance(before, list) and isinstance(after, list) and set(before) < set(after)
    if key == STEPS:
        return isinstance(before, int) and isinstance(after, int) and after > before
    return False


def _trials(spec: dict[str, Any]) -> dict[Any, dict[str, Any]]:
    """A sweep spec's trials by name."""
    return {t.get("name"): t for t in spec.get("trials") or [] if isinstance(t, dict)}


def _changed(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """The trained fields of one trial that differ between its recorded spec and this run, sorted:
    (key, recorded value, this run's value)."""
    before, after = trained_fields(old, recorded=True), trained_fields(new)
    return sorted((k, before.get(k), after[k]) for k in after if before.get(k) != after[k]
                  and not (k in DECIDED_ON_RAY and after[k] is None))


def sweep_change(recorded: dict[str, Any], current: dict[str, Any]) -> str | None:
    """The first difference that matters between a recorded sweep (`sweep.json`: `preset`, `trials`)
    and this run's, in words with how to resume it; None when this run is the same sweep or one
    that grows it (`sweep_extension`: more trials, grids or steps)."""
    if recorded.get("preset") != current.get("preset"):
        before, after = recorded.get("preset"), current.get("preset")
        return (f"preset {_shown(before)} -> {_shown(after)}; to resume it, rerun with "
                f"--preset {before}")
    old, new = _trials(recorded), _trials(current)
    gone = sorted(set(old) - set(new), key=str)
    if gone:
        return (f"{len(gone)} of its trials not in this run (e.g. {gone[0]}); to resume it, "
                "rerun with the same sweep flags (a rerun may add trials, not leave any out)")
    for name in (n for n in new if n in old):
        changed = [c for c in _changed(old[name], new[name]) if not _grown(*c)]
        if changed:
            key, value, now = changed[0]
            now = _shown(now)
            more = f" (and {len(changed) - 1} more field(s))" if len(changed) > 1 else ""
            if key == THREADS:  # named by the key a user sets
                cpus = "cluster.cpus_per_worker"
                key, value, now = cpus, _recorded(old[name], cpus), (
                    f"{_shown(_recorded(new[name], cpus))} ({value} -> {now} torch "
                    "threads per worker)")
            return (f"trial {name}: {key} {_shown(value)} -> {now}{more}; to resume "
                    f"it, rerun with --set {key}={_as_set(value)} (a rerun may add trials, "
                    "grids or steps, nothing else)")
    inside = [n for n in old if _recorded(old[n], "cluster.trainer") == "function"]
    if inside and sweep_extension(recorded, current).trains:
        return (f"trial {inside[0]} runs in its Tune trial (cluster.trainer=function), whose "
                "checkpoints a new Tune run cannot continue, so this sweep cannot grow by trials "
                "or steps; give another --storage")
    return None


def recorded_names(recorded: dict[str, Any], current: dict[str, Any]) -> dict[str, str]:
    """This run's name -> the recorded spec's, for each trial it holds under another name: a
    trial is what it trains (its trained fields, less the growth a rerun may bring), and its name
    follows what is swept, so a sweep run at one seed and grown to three names its seed-0 trials
    anew (`..._seed=0`); the kept trials keep their recorded names (and with them their Train
    runs and rows)."""
    def what(trial: dict[str, Any], *, was: bool = False) -> str:
        fields = trained_fields(trial, recorded=was)
        return json.dumps({k: v for k, v in fields.items() if k not in ("name", GRIDS, STEPS)},
                          sort_keys=True, default=str)

    old, new = _trials(recorded), _trials(current)
    by_what = {what(t, was=True): name for name, t in old.items() if name not in new}
    out = {}
    for name, trial in new.items():
        if name not in old and (was := by_what.pop(what(trial), None)) is not None:
            out[name] = was
    return out


def sweep_extension(recorded: dict[str, Any], current: dict[str, Any]) -> Extension:
    """How this run grows the recorded sweep (`sweep_change` found nothing else): the trials it
    adds, those it scores on more grids, those it trains further."""
    old, new = _trials(recorded), _trials(current)
    kept = [n for n in new if n in old]
    changed = {n: {key for key, _, _ in _changed(old[n], new[n])} for n in kept}
    return Extension(added=tuple(n for n in new if n not in old),
                     grids=tuple(n for n in kept if GRIDS in changed[n]),
                     steps=tuple(n for n in kept if STEPS in changed[n]))


def _as_set(value: Any) -> str:
    """A recorded value as `--set` takes it."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)
