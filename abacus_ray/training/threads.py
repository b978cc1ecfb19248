"""How many torch threads a process on CPUs trains or scores with, and why it is recorded.

The thread count changes how a CPU sums floats, so it is part of what makes a model: a sweep's
worker runs with Ray's `OMP_NUM_THREADS` (the floor of its CPUs, at least 1), and `train` given
that trial's config and its thread count trains the same weights (`meta.json` records `threads`
beside every checkpoint). Unset, a command takes the CPUs this process may use (its CPU affinity,
cut to its cgroup's CPU quota: a container's or a batch job's share) that other work leaves idle
when its first command starts, at least one: a thread on a core another process keeps busy stalls
every parallel operation of the others (`benchmarks/threads.py`: two threads beside one busy core
train at half the rate of one thread). A resumed run keeps the count its checkpoint records, so its
floats go on being summed as they were. The count used is printed and recorded; `--threads N`
fixes it.
"""

from __future__ import annotations

import functools
import math
import os

import psutil
import torch

from abacus_ray import storage

BUSY_SAMPLE_S = 0.3  # how long a start-up looks at the CPUs to see which are busy
BUSY = 50.0  # a CPU busier than this (percent) over that time is taken by other work


def allowed_cpus() -> list[int]:
    """The CPU numbers this process may run on (its affinity)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity, cut to its cgroup's quota (at least 1)."""
    cpus = len(allowed_cpus())
    quota = storage.cpu_quota()
    return max(1, min(cpus, math.floor(quota) if quota is not None else cpus))


@functools.cache
def idle_cpus() -> int:
    """The usable CPUs other work leaves idle (at least 1): the default thread count, looked at
    once per process (its first command), so that every run of one process sums alike."""
    allowed = allowed_cpus()
    percents = psutil.cpu_percent(interval=BUSY_SAMPLE_S, percpu=True)
    busy = sum(1 for cpu in allowed if cpu < len(percents) and percents[cpu] > BUSY)
    return max(1, min(usable_cpus(), len(allowed) - busy))


def set_threads(given: int | None, flag: str = "--threads", recorded: int | None = None) -> int:
    """Set torch's intra-op threads and return the count: `given`; else `recorded` (the count a
    resumed checkpoint was trained with) where this process may use that many; else
    `idle_cpus()`. More than this process may use is refused in one line naming `flag`."""
    usable = usable_cpus()
    if given is not None and not 1 <= given <= usable:
        raise ValueError(f"{flag}: {given} is not between 1 and the {usable} CPU(s) this process "
                         "may use (its affinity and cgroup quota)")
    if given is not None:
        count = given
    elif isinstance(recorded, int) and 1 <= recorded <= usable:
        count = recorded
    else:
        count = idle_cpus()
    torch.set_num_threads(count)
    return count
