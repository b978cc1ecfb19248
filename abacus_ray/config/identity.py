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

Anything else that differs is named, old -> new, with how to proceed.
"""

from __future__ import annotations

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


def sweep_change(recorded: dict[str, Any], current: dict[str, Any]) -> str | None:
    """The first difference that matters between a recorded sweep (`sweep.json`: `preset`, `trials`)
    and this run's, in words with how to resume it; None when they are the same sweep."""
    if recorded.get("preset") != current.get("preset"):
        before, after = recorded.get("preset"), current.get("preset")
        return (f"preset {_shown(before)} -> {_shown(after)}; to resume it, rerun with "
                f"--preset {before}")
    old = {t.get("name"): t for t in recorded.get("trials") or [] if isinstance(t, dict)}
    new = {t.get("name"): t for t in current.get("trials") or []}
    if set(old) != set(new):
        gone, added = sorted(set(old) - set(new), key=str), sorted(set(new) - set(old), key=str)
        parts = [f"{len(gone)} of its trials not in this run (e.g. {gone[0]})"] if gone else []
        parts += [f"{len(added)} trial(s) it does not hold (e.g. {added[0]})"] if added else []
        return "; ".join(parts) + "; to resume it, rerun with the same sweep flags"
    for name in new:
        before, after = trained_fields(old[name], recorded=True), trained_fields(new[name])
        changed = sorted(k for k in after if before.get(k) != after[k]
                         and not (k in DECIDED_ON_RAY and after[k] is None))
        if changed:
            key = changed[0]
            more = f" (and {len(changed) - 1} more field(s))" if len(changed) > 1 else ""
            value, now = before.get(key), _shown(after[key])
            if key == THREADS:  # named by the key a user sets
                cpus = "cluster.cpus_per_worker"
                key, value, now = cpus, _recorded(old[name], cpus), (
                    f"{_shown(_recorded(new[name], cpus))} ({before.get(THREADS)} -> {now} torch "
                    "threads per worker)")
            return (f"trial {name}: {key} {_shown(value)} -> {now}{more}; to resume "
                    f"it, rerun with --set {key}={_as_set(value)}")
    return None


def _as_set(value: Any) -> str:
    """A recorded value as `--set` takes it."""
    if value is None:
        return "null"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)
