"""A real multi-node Ray cluster, in a loopback-only network namespace: placement, DDP across nodes,
grid evaluation across nodes, node loss. Everything goes through `ray job submit` with the token.

The cluster (`tests/raycluster.py`): a head with 1 CPU, a "GPU node" with 2 CPUs, one fake GPU slot
and the custom resource `accel`, and a CPU-only node with 3 CPUs and the custom resource `cpu_pool`, each its own raylet with its own
temp dir; storage is a directory every node sees. Where things ran is read from Ray's own records
(the state API's actors, the placement-group table) and from the `worker` column of the results.
"""

from __future__ import annotations

import json
import time

import pytest
from raycluster import RAY, ROOT, Cluster, Namespace

from abacus_ray.evaluation.results import KEY, read_cells

pytestmark = [pytest.mark.ray, pytest.mark.slow]

WORKERS_AND_NODES = """
import json
from ray.util.state import list_actors
nodes = {n["NodeID"]: n["Resources"] for n in ray.nodes()}
actors = list_actors(address=DASHBOARD, filters=[("class_name", "=", "RayTrainWorker")], detail=True, limit=10000,
                     raise_on_missing_output=False)
pgs = ray.util.placement_group_table()
print(json.dumps({"nodes": nodes, "pgs": {k: v["strategy"] for k, v in pgs.items()},
                  "workers": [{"node": a.node_id, "resources": a.required_resources, "pg": a.placement_group_id,
                               "state": a.state} for a in actors]}))
"""


# SPARE: each CPU node offers one worker slot more than the two trials need. Measured: when a node dies
# with a trial's Tune driver on it, the restarted trial waited 3.5 min in one run and more than 5 in
# another before training again, with both CPU slots of the surviving node seemingly taken. The likely
# cause (not confirmed): the dead Train controller's worker placement group, rescheduled by the GCS
# onto the surviving node until Ray Train's cleaner removes it (docs/results.md, "Service findings").


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    import ray

    ray.shutdown()  # the in-process test Ray would compete for the 2 cores
    ns = Namespace()
    work = tmp_path_factory.mktemp("multinode")
    c = Cluster(work, ns)
    c.env["GLOO_SOCKET_IFNAME"] = "lo"  # the namespace's one interface (a real cluster: its private network)
    try:
        c.start_head(num_cpus=1)
        c.add_node("gpu", num_cpus=2, num_gpus=1, resources={"accel": 1})
        c.add_node("cpu", num_cpus=3, resources={"cpu_pool": 3})  # 3: see SPARE above
        yield c
    finally:
        c.stop()
        ns.close()


def node_of(records: dict, *, gpu: bool) -> set[str]:
    return {n for n, r in records["nodes"].items() if (r.get("GPU", 0) > 0) == gpu}


def test_trials_and_evaluation_pools_are_placed_by_config(cluster, tmp_path):
    t0 = time.monotonic()
    out = cluster.submit(["python", "tests/cluster_sweeps/placement.py", "--storage", str(tmp_path), "--no-dashboard"],
                         timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    records = cluster.query(WORKERS_AND_NODES)
    gpu_node, = node_of(records, gpu=True)
    placed = {any(k.startswith("GPU") for k in w["resources"]): w["node"] for w in records["workers"]}
    assert placed[True] == gpu_node  # the GPU-slot trial's worker: the only node with a GPU and `accel`
    cpu_node, = {n for n, r in records["nodes"].items() if "cpu_pool" in r}
    assert placed[False] == cpu_node  # the CPU trial's worker: on the CPU node, leaving the GPU node's CPUs
    df = read_cells(tmp_path / "placement" / "results")
    assert df["model_id"].nunique() == 2 and len(df) == 2 * 36 and not df.duplicated(list(KEY)).any()
    pools = {pool: {w.split(":")[2] for w in df["worker"] if w.startswith(pool)} for pool in ("gpu", "cpu")}
    assert pools["gpu"] == {gpu_node[:8]}  # the GPU pool's actor on the GPU node
    assert pools["cpu"] - {gpu_node[:8]}, pools  # CPU actors on other nodes
    print(f"\nplacement: GPU trial on {gpu_node[:8]}, CPU trial on {placed[False][:8]}; {len(df)} rows, "
          f"pools {pools}; {time.monotonic() - t0:.0f}s")


def final_reports(root) -> dict[str, dict]:
    out = {}
    for result in (root / "tune").glob("*/result.json"):
        lines = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        out[json.loads((result.parent / "params.json").read_text())["run"]] = lines[-1]
    return out


def test_ddp_trial_across_two_nodes_equals_the_same_trial_on_one(cluster, tmp_path):
    t0 = time.monotonic()
    out = cluster.submit(["python", "tests/cluster_sweeps/ddp_nodes.py", "--storage", str(tmp_path), "--no-eval",
                          "--no-dashboard"], timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    records = cluster.query(WORKERS_AND_NODES)
    by_pg: dict[str, list[str]] = {}
    for w in records["workers"]:
        by_pg.setdefault(w["pg"], []).append(w["node"])
    spans = {records["pgs"][pg]: nodes for pg, nodes in by_pg.items() if records["pgs"].get(pg, "").startswith("STRICT")}
    assert len(spans["STRICT_PACK"]) == 2 and len(set(spans["STRICT_PACK"])) == 1
    assert len(spans["STRICT_SPREAD"]) == 2 and len(set(spans["STRICT_SPREAD"])) == 2  # one worker per node
    reports = final_reports(tmp_path / "ddp_nodes")
    one, two = reports["ddp_nodes/placement=STRICT_PACK"], reports["ddp_nodes/placement=STRICT_SPREAD"]
    assert one["final"] and two["final"] and one["step"] == two["step"] == 40
    assert one["world_size"] == two["world_size"] == 2
    assert abs(one["loss"] - two["loss"]) <= 1e-5 * abs(one["loss"]), (one["loss"], two["loss"])
    print(f"\nddp: one node {set(spans['STRICT_PACK'])}, two nodes {set(spans['STRICT_SPREAD'])}; loss at step 40 "
          f"{one['loss']!r} vs {two['loss']!r}; {time.monotonic() - t0:.0f}s")



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
    the weights and numbers equal an undisturbed run of the same trials. (Last here: it kills nodes.)"""
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
        victim, deadline = None, time.monotonic() + 300
        while victim is None:  # a trial's worker on a CPU node, past its first checkpoint
            assert time.monotonic() < deadline and job.poll() is None, job_log()
            time.sleep(1)
            if list(root.glob("train/*/step-*")):
                on, ids = set(cluster.query(ALIVE_TRAIN_WORKERS)), cluster.node_ids()
                victim = next((name for name in ("victim", "cpu") if ids.get(name) in on), None)
        cluster.kill_node(victim)
        killed_training = time.monotonic() - t0
        deadline = time.monotonic() + 480  # a trial whose driver died restarts after minutes (measured 3.5)
        while not list((root / "results").glob("part-*.parquet")):
            assert time.monotonic() < deadline and job.poll() is None, job_log()
            time.sleep(0.2)
        cluster.kill_node("gpu")  # mid-evaluation
        killed_eval = time.monotonic() - t0
        assert job.wait(timeout=480) == 0, job_log()
    finally:
        if job.poll() is None:
            job.kill()
    df = read_cells(root / "results")
    assert df["run_id"].nunique() == 2 and len(df) == 2 * 400 and not df.duplicated(list(KEY)).any()
    assert all(r["final"] and r["step"] == 60 for r in final_reports(root).values())
    # an undisturbed training of each trial (in this process, one thread as a 1-CPU worker) gives the
    # same weights, bit for bit: the killed trial resumed its data stream and RNG from the checkpoint
    import torch

    from abacus_ray.cli.sweep import load_sweep
    from abacus_ray.training.loop import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for trial in load_sweep(str(ROOT / "tests" / "cluster_sweeps" / "nodeloss.py")).expand("tiny"):
            straight = train(trial.config, checkpoint_dir=tmp_path / "straight" / trial.name.replace("/", "_"))
            assert set(df.loc[df["run_id"] == trial.name, "model_id"]) == {straight.model_id}, trial.name
    finally:
        torch.set_num_threads(threads)
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
