"""Torch threads: sized from the CPUs a process may use and recorded with each checkpoint (that a
trial's config and thread count train that sweep trial's model again: tests/test_fig10_on_ray.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pace import deadline

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: object, cwd: Path, timeout: float = 300,
         pre: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*pre, sys.executable, "-m", "abacus_ray.cli", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=deadline(timeout))


@pytest.mark.slow
def test_threads_follow_the_cpus_a_process_may_use(tmp_path):
    """Pinned to one CPU (its affinity), a command takes one thread and refuses a second."""
    one = [f"--set={s}" for s in ("train.max_steps=2", "model.hidden=32", "model.intermediate=64",
                                  "model.heads=2")]
    pin = ("taskset", "-c", "0")
    done = _cli("train", "--out", tmp_path / "a", "--device", "cpu", *one, cwd=tmp_path, pre=pin)
    assert done.returncode == 0, done.stderr
    (meta,) = (tmp_path / "a").glob("step-*/meta.json")
    assert json.loads(meta.read_text())["threads"] == 1
    refused = _cli("train", "--out", tmp_path / "b", "--threads", "2", *one, cwd=tmp_path, pre=pin)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        "abacus-ray train: error: --threads: 2 is not between 1 and the 1 CPU(s) this process may "
        "use (its affinity and cgroup quota)"], refused.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs, one of them busy")
def test_a_busy_core_is_left_out_and_a_resume_keeps_its_checkpoints_count(tmp_path):
    """Beside a process spinning on CPU 0, a command that may use CPUs 0 and 1 takes one thread
    (two would stall on the busy core), says so, and records it; resumed with the spinner gone and
    more steps, the run keeps the count its checkpoint records."""
    one = [f"--set={s}" for s in ("model.hidden=32", "model.intermediate=64", "model.heads=2")]
    pin = ("taskset", "-c", "0,1")
    spinner = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"])
    try:
        done = _cli("train", "--out", tmp_path / "a", "--device", "cpu", "--set=train.max_steps=2",
                    *one, cwd=tmp_path, pre=pin)
    finally:
        spinner.kill()
        spinner.wait()
    assert done.returncode == 0 and "on cpu, 1 thread(s)" in done.stderr, done.stderr
    (meta,) = (tmp_path / "a").glob("step-*/meta.json")
    assert json.loads(meta.read_text())["threads"] == 1
    resumed = _cli("train", "--out", tmp_path / "a", "--resume", "--set=train.max_steps=4",
                   cwd=tmp_path, pre=pin)
    assert resumed.returncode == 0, resumed.stderr
    last = sorted((tmp_path / "a").glob("step-*/meta.json"))[-1]
    assert json.loads(last.read_text())["step"] == 4 and json.loads(last.read_text())["threads"] == 1
