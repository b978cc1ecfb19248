"""Node loss on a real multi-node Ray cluster: a CPU node killed mid-sweep, the GPU node mid-evaluation.

Its own cluster (`tests/raycluster.py`, `lab_cluster`, plus a third CPU node to kill), so that it runs
beside `test_multinode.py` on another test worker. The head notices a dead node after 3 missed health
checks 1 s apart instead of Ray's default 5 x 3 s: only how soon Ray reacts changes, not what it does.
"""

from __future__ import annotations

import time

import pytest
from faults import one_thread
from pace import deadline
from raycluster import RAY, ROOT, final_reports, lab_cluster

from abacus_ray.evaluation.results import KEY, read_cells

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.cost(240)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with lab_cluster(tmp_path_factory.mktemp("nodeloss"), RAY_health_check_period_ms="1000",
                     RAY_health_check_failure_threshold="3") as c:
        yield c


ALIVE_TRAIN_WORKERS = """
import json
from ray.util.state import list_actors
print(json.dumps([a.node_id for a in list_actors(address=DASHBOARD, filters=[("state", "=", "ALIVE"), ("class_name", "=", "RayTrainWorker")],
                                                 detail=True, limit=10000, raise_on_missing_output=False)]))
"""


def test_lost_nodes_mid_sweep_and_mid_evaluation_lose_nothing(cluster, tmp_path):
    """SIGKILL a CPU node under a training trial, then the GPU node (its GPU evaluator always holds most
    of the items) under the grid evaluation: the trials resume from their last checkpoint on the nodes
    left, the missing cells run again on the CPU actors left, every cell is written exactly once, and
    the weights and numbers equal an undisturbed run of the same trials."""
    import subprocess

    from abacus_ray.cli import main as cli_main

    t0 = time.monotonic()
    cluster.add_node("victim", num_cpus=3, resources={"cpu_pool": 3})
    root = tmp_path / "nodeloss"
    with open(tmp_path / "job.log", "wb") as log:
        job = subprocess.Popen(cluster.wrap([str(RAY), "job", "submit", "--address", cluster.dashboard, "--working-dir",
                                             str(ROOT), "--", "python", "tests/cluster_sweeps/nodeloss.py",
                                             "--storage", str(tmp_path), "--no-dashboard"]),
                               env=cluster.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    job_log = lambda: (tmp_path / "job.log").read_text(errors="replace")[-4000:]  # noqa: E731
    try:
        victim, end = None, time.monotonic() + deadline(300)  # deadlines: seconds on 2 idle cores (pace.py)
        while victim is None:  # a trial's worker on a CPU node, past its first checkpoint
            assert time.monotonic() < end and job.poll() is None, job_log()
            time.sleep(1)
            if list(root.glob("train/*/step-*")):
                on, ids = set(cluster.query(ALIVE_TRAIN_WORKERS)), cluster.node_ids()
                victim = next((name for name in ("victim", "cpu") if ids.get(name) in on), None)
        cluster.kill_node(victim)
        killed_training = time.monotonic() - t0
        end = time.monotonic() + deadline(480)  # a trial whose driver died restarts after minutes (measured 3.5)
        while not list((root / "results").glob("part-*.parquet")):
            assert time.monotonic() < end and job.poll() is None, job_log()
            time.sleep(0.2)
        cluster.kill_node("gpu")  # mid-evaluation
        killed_eval = time.monotonic() - t0
        assert job.wait(timeout=deadline(480)) == 0, job_log()
    finally:
        if job.poll() is None:
            job.kill()
    df = read_cells(root / "results")
    assert df["run_id"].nunique() == 2 and len(df) == 2 * 400 and not df.duplicated(list(KEY)).any()
    assert all(r["final"] and r["step"] == 60 for r in final_reports(root).values())
    # an undisturbed training of each trial (in this process, one thread as a 1-CPU worker) gives the
    # same weights, bit for bit: the killed trial resumed its data stream and RNG from the checkpoint
    from abacus_ray.cli.sweep import load_sweep
    from abacus_ray.training.loop import train

    with one_thread():
        for trial in load_sweep(str(ROOT / "tests" / "cluster_sweeps" / "nodeloss.py")).expand("tiny"):
            straight = train(trial.config, checkpoint_dir=tmp_path / "straight" / trial.name.replace("/", "_"))
            assert set(df.loc[df["run_id"] == trial.name, "model_id"]) == {straight.model_id}, trial.name
    for checkpoint, rows in df.groupby("checkpoint"):  # an undisturbed evaluation, in this process, no Ray
        out = tmp_path / "clean" / rows["run_id"].iloc[0].replace("/", "_")
        assert cli_main(["eval", checkpoint, "--cells", "1-20x1-20", "--per-cell", "10", "--out", str(out),
                         "--quiet"]) == 0
        clean = read_cells(out).set_index(["i", "j"])["n_correct"].sort_index()
        assert rows.set_index(["i", "j"])["n_correct"].sort_index().equals(clean)
    retried = "missing cells again" in job_log()
    assert retried, job_log()  # the GPU actor's unfinished items ran again on the CPU actors
    print(f"\nnode loss: killed {victim} at {killed_training:.0f}s (training), the GPU node at {killed_eval:.0f}s "
          f"(evaluation, missing cells rerun); {len(df)} rows, 0 duplicates, 0 missing; {time.monotonic() - t0:.0f}s")
