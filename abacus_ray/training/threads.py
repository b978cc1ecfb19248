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
from pathlib import Path

import torch

CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")  # "QUOTA PERIOD" or "max PERIOD"
CGROUP_V1 = (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
             Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity, cut to its cgroup's quota (at least 1)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(cpus, math.floor(quota) if quota is not None else cpus))


def _cgroup_quota() -> float | None:
    """CPUs the cgroup's quota allows (None: no quota, or none readable)."""
    try:
        if CGROUP_V2.is_file():
            quota, period = CGROUP_V2.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota_file, period_file = CGROUP_V1
        if quota_file.is_file() and period_file.is_file():
            quota_us = int(quota_file.read_text())
            return None if quota_us <= 0 else quota_us / int(period_file.read_text())
    except (OSError, ValueError):
        return None
    return None


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
