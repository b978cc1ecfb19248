"""The fault tests' tools: start a driver, poll what it writes, SIGKILL it, check nothing outlives it.

Shared by `test_faults_trial.py` (a killed Ray Train worker), `test_faults_driver.py` (a killed sweep
driver) and `test_faults_eval.py` (a killed grid evaluation). Every fault is a real SIGKILL of a real
process (no mocks), landed while the work is in flight and synchronised by polling what the process
writes to storage, never by a fixed sleep alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch

from benchmarks.census import descendants, title

ROOT = Path(__file__).resolve().parents[1]


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll `condition` until it returns something truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """The processes that still run (a zombie awaiting its reaper has already released everything)."""
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.Error, OSError):
            pass
    return out


@contextlib.contextmanager
def one_thread():
    """Train with one torch thread (as a 1-CPU Ray worker does), then restore the suite's setting."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def read_json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment of a driver subprocess: an embedded local Ray of its own, one torch thread in the
    driver (its Ray workers get one per CPU anyway), unbuffered output."""
    keep = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return keep | {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"} | extra


def start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    """Start `cmd` in its own session (so its process group is its own), output to `log`."""
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


def kill_driver(proc: subprocess.Popen, grace: float = 30.0) -> tuple[int, list[str], list[str]]:
    """SIGKILL the driver process alone; its embedded Ray (GCS, raylet, workers) must exit with it.

    Returns (how many processes the driver had started, titles of the Ray core processes still alive
    after `grace` seconds, titles of the Ray agents still alive then). Ray 2.60's per-node agents
    outlive a killed driver by about a minute (on noticing the raylet's death they first try to
    report it to the GCS, which is gone), so whatever is left is then killed through the driver's
    process group (the agents are in it) and by pid: nothing outlives the test.
    """
    family = [(p, title(p)) for p in descendants(proc.pid)[1:]]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    core = [p for p, t in family if not t.startswith(RAY_AGENTS)]
    deadline = time.monotonic() + grace
    while alive(core) and time.monotonic() < deadline:
        time.sleep(0.1)
    names = {p.pid: t or f"pid {p.pid}" for p, t in family}
    left_core = [names[p.pid] for p in alive(core)]
    left = alive([p for p, _ in family])
    left_agents = [names[p.pid] for p in left if names[p.pid].startswith(RAY_AGENTS)]
    if left:  # the group still has members, so it is still ours (start_new_session: the driver leads it)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    for p in alive(left):  # anything that had moved to a group of its own
        with contextlib.suppress(psutil.Error):
            p.send_signal(signal.SIGKILL)
    return len(family), left_core, left_agents


def finish(proc: subprocess.Popen, log: Path, timeout: float) -> str:
    """Wait for `proc` to exit 0 (fail with its log's tail otherwise); returns its output."""
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_driver(proc)
        pytest.fail(f"{proc.args[1]} did not finish in {timeout:.0f}s:\n{log.read_text()[-3000:]}")
    text = log.read_text()
    assert rc == 0, f"{proc.args[1]} exited {rc}:\n{text[-3000:]}"
    return text


def uninterrupted_scores(configs: list, grid: str, out: Path) -> dict[tuple[str, int, int], int]:
    """What an uninterrupted run of these trials scores: each trained straight through in this
    process (one torch thread, as a 1-CPU Ray worker; the thread count moves a weight's last bits)
    and scored on `grid`'s cells with its own eval settings. (model_id, i, j) -> n_correct."""
    from abacus_ray.evaluation.grids import resolve_grid_names
    from abacus_ray.evaluation.runner import score_cells
    from abacus_ray.model.checkpoint import load_checkpoint, located
    from abacus_ray.training.loop import train

    cells = [c for g in resolve_grid_names((grid,)) for c in g.cells("add")]
    scores: dict[tuple[str, int, int], int] = {}
    for n, cfg in enumerate(configs):
        with one_thread():
            result = train(cfg, checkpoint_dir=out / f"trial-{n}")
            rows, _ = score_cells(load_checkpoint(located(result.checkpoint)), cells, cfg.eval)
        scores.update({(r["model_id"], r["i"], r["j"]): r["n_correct"] for r in rows})
    return scores

