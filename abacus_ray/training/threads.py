"""How many torch threads a process on CPUs trains or scores with, and why it is recorded.

The thread count changes how a CPU sums floats, so it is part of what makes a model: a sweep's
worker runs with Ray's `OMP_NUM_THREADS` (the floor of its CPUs, at least 1), and `train` given
that trial's config and its thread count trains the same weights (`meta.json` records `threads`
beside every checkpoint). Unset, a command takes the CPUs this process may use: its CPU affinity,
cut to its cgroup's CPU quota (a container's or a batch job's share), never more, so that it does
not oversubscribe cores it was not given.
"""

from __future__ import annotations

import math
import os

import torch

from abacus_ray import storage


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity, cut to its cgroup's quota (at least 1)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = storage.cpu_quota()
    return max(1, min(cpus, math.floor(quota) if quota is not None else cpus))


def set_threads(given: int | None, flag: str = "--threads") -> int:
    """Set torch's intra-op threads to `given` (None: `usable_cpus()`) and return the count; more
    than this process may use is refused in one line naming `flag`."""
    usable = usable_cpus()
    if given is not None and not 1 <= given <= usable:
        raise ValueError(f"{flag}: {given} is not between 1 and the {usable} CPU(s) this process "
                         "may use (its affinity and cgroup quota)")
    count = usable if given is None else given
    torch.set_num_threads(count)
    return count
