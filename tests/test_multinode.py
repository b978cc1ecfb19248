"""A real multi-node Ray cluster, in a loopback-only network namespace: placement, DDP across nodes,
grid evaluation across nodes (node loss: `test_multinode_nodeloss.py`, on a cluster of its own).
Everything goes through `ray job submit` with the token.

The cluster (`tests/raycluster.py`, `lab_cluster`): a head with 1 CPU, a "GPU node" with 2 CPUs, one
fake GPU slot and the custom resource `accel`, and a CPU-only node with 3 CPUs and the custom resource
`cpu_pool`, each its own raylet with its own temp dir; storage is a directory every node sees. Where
things ran is read from Ray's own records (the state API's actors, the placement-group table) and from
the `worker` column of the results.
"""

from __future__ import annotations

import time

import pytest
from raycluster import final_reports, lab_cluster

from abacus_ray.evaluation.results import KEY, read_cells

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.cost(210)]

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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with lab_cluster(tmp_path_factory.mktemp("multinode")) as c:
        yield c


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
