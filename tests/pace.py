"""Deadlines that scale with the measured speed of the machine, the one home for the cluster tests' waits.

A multi-node test waits for things (a node to start, a checkpoint to appear, a job to end) whose time
depends on how much CPU the machine gives it: a slower CPU, fewer cores or another CPU-heavy process
stretch them all. A fixed number of seconds is then either a flake on a busy machine or a hang that
takes forever to be reported on a fast one. So every deadline is a base (what the wait needs on the
project's reference machine, 2 idle cores) times `slowness()`: a fixed CPU-bound workload is timed, at
the niceness of Ray's workers, every core at once, once per test process, against its time on that
reference machine. Never below 1: a deadline is an upper bound, and Ray's own fixed timers (health
checks, retries) do not speed up.
`ABACUS_TEST_SLOWNESS=F` sets the factor instead (a CI runner known to be slow, or a debugging
session that wants generous waits).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable

# Pure-Python arithmetic: what Ray's control plane, the sweep driver and the tests' own polling spend
# their CPU on. Prints its own loop time, so interpreter start-up is not counted.
WORKLOAD = """
import time
t = time.perf_counter(); x = 0
for i in range(2_000_000):
    x += i * i % 7
print(time.perf_counter() - t)
"""
# Ray starts its worker processes (trials, Train workers, evaluators) at this niceness, and they do most
# of the waited-for work: timed at it, the workload sees what they see. On an idle machine the niceness
# changes nothing; beside a CPU-bound process of normal priority it is the difference between half the
# CPU and a few per cent of it.
RAY_WORKER_NICENESS = 15
REFERENCE_S = 0.36  # the workload's loop time per process with both cores of the reference machine idle


@functools.cache
def slowness() -> float:
    """How many times slower than the reference machine this one runs the workload now (>= 1)."""
    if forced := os.environ.get("ABACUS_TEST_SLOWNESS"):
        return max(1.0, float(forced))
    cores = len(os.sched_getaffinity(0))
    procs = [subprocess.Popen([sys.executable, "-c", WORKLOAD], stdout=subprocess.PIPE, text=True,
                              preexec_fn=lambda: os.nice(RAY_WORKER_NICENESS))
             for _ in range(cores)]
    times = [float(p.communicate(timeout=600)[0]) for p in procs]
    return max(1.0, max(times) / REFERENCE_S)


def deadline(base_s: float) -> float:
    """`base_s` (seconds on the reference machine) scaled to this machine's measured speed."""
    return base_s * slowness()


def wait_for(condition: Callable[[], object], base_s: float, what: str, interval: float = 0.2,
             alive: Callable[[], bool] | None = None, context: Callable[[], str] = lambda: "") -> object:
    """Poll `condition` until it returns something truthy, for `deadline(base_s)` seconds.

    `alive` (say, a job still running) is checked too, so a process that died is reported at once
    rather than at the deadline; `context` adds what to show on failure (a log's tail)."""
    limit = deadline(base_s)
    end = time.monotonic() + limit
    while True:
        if value := condition():
            return value
        if alive is not None and not alive():
            raise AssertionError(f"stopped before {what}\n{context()}")
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {limit:.0f}s (base {base_s:.0f}s x slowness {slowness():.2f}) "
                                 f"waiting for {what}\n{context()}")
        time.sleep(interval)
