"""`ray job submit` against a local head on 127.0.0.1 runs a sweep file end to end."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from abacus_ray.evaluation.results import read_cells

ROOT = Path(__file__).resolve().parents[1]
RAY = Path(sys.executable).with_name("ray")
pytestmark = pytest.mark.ray


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_started(log: Path, head: subprocess.Popen, deadline_s: float = 120) -> None:
    """`ray start` prints this line once the GCS, raylet, dashboard and job agent are all up."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if "Ray runtime started" in text:
            return
        if head.poll() is not None:
            raise RuntimeError(f"ray start exited with {head.returncode}: {text[-2000:]}")
        time.sleep(0.5)
    raise TimeoutError(f"ray start not up after {deadline_s} s")


@pytest.fixture
def head(tmp_path):
    """A `ray start --head --block` cluster bound to loopback; stopped afterwards.

    `--block` keeps the head's daemons under a child of pytest, so the suite's listener watch
    (conftest) sees their sockets too.
    """
    import ray

    ray.shutdown()  # the in-process test Ray would compete for the 2 cores
    # As with an activated venv: the job's `python` must be the one that has abacus-ray installed.
    env = os.environ | {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
                        "RAY_AUTH_MODE": "disabled", "PATH": f"{RAY.parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("RAY_ADDRESS", None)
    gcs, dash = _free_port(), _free_port()
    proc = subprocess.Popen([str(RAY), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={gcs}",
                             "--num-cpus=2", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                             f"--dashboard-port={dash}", "--disable-usage-stats"],
                            env=env, stdout=(log := (tmp_path / "head.log").open("w")), stderr=subprocess.STDOUT)
    try:
        _wait_until_started(tmp_path / "head.log", proc)
        yield f"http://127.0.0.1:{dash}", env
    finally:
        subprocess.run([str(RAY), "stop", "--force"], env=env, capture_output=True, timeout=120)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_job_submit_runs_fig10(head, tmp_path):
    address, env = head
    storage = tmp_path / "storage"
    cmd = [str(RAY), "job", "submit", "--address", address, "--working-dir", str(ROOT), "--",
           "python", "sweeps/fig10_k.py", "--preset", "tiny", "--storage", str(storage), "--max-trials", "2",
           "--set", "train.max_steps=10", "--set", "eval.per_cell=2", "--grid", "cells:1-2x1-2", "--no-dashboard"]
    for _ in range(30):  # the head's job agent registers a few seconds after `ray start` reports success
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if "No available agent" not in out.stderr:
            break
        time.sleep(2)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "succeeded" in out.stdout + out.stderr
    df = read_cells(storage / "fig10_k" / "results")
    assert df["model_id"].nunique() == 2 and len(df) == 8
