"""Nodes that share nothing but the network: the Fig. 10 sweep on an S3 bucket through `ray job submit`.

The cluster (`tests/raycluster.py`, `network_only_cluster`): a head that only hosts the jobs' drivers
and worker nodes, each in a mount namespace of its own (private `/tmp`, `/dev/shm`, `HOME` and working
directory; the checkout read-only, as an image), all in a loopback-only network namespace whose only
other inhabitant is a real S3 server (SeaweedFS, `tests/s3server.py`). What a cloud lab has: a file a
node writes locally is seen by no other node, so whatever the sweep needs elsewhere must go through
the bucket. One scenario instead keeps the sweep in a host directory outside the nodes' private
`/tmp`, which every node sees, as a shared mount. One cluster for the module; the scenarios run in
file order and share the clean run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
from pace import deadline, wait_for
from raycluster import RAY, ROOT, Cluster, kill_tree, network_only_cluster

from abacus_ray.evaluation.results import read_cells
from abacus_ray.storage import on_disk

pytestmark = [pytest.mark.cluster, pytest.mark.ray, pytest.mark.slow, pytest.mark.cost(760)]

# Two trials of the tiny Fig. 10 sweep, short: a checkpoint every 3 s (so a node lost mid-training has
# one to resume from), a 400-cell grid (long enough to lose a node under it, as the node-loss test).
# Batches of 64, as the scenarios were timed (the demo's are smaller). A steps budget alone: a
# wall-clock limit would let the machine's speed move the lr schedule, and no rerun could match.
SWEEP = ["python", "sweeps/fig10_k.py", "--preset", "tiny", "--max-trials", "2", "--set", "train.max_steps=60",
         "--set", "train.budget_hours=none",
         "--set", "train.global_batch=64", "--set", "train.micro_batch=64",
         "--set", "train.report_every_s=1", "--set", "train.checkpoint_every_min=0.05", "--per-cell", "10",
         "--grid", "cells:1-20x1-20", "--no-dashboard"]
CELLS = 2 * 400
KEY = ["model_id", "task", "i", "j", "per_cell", "eval_seed", "recurrences"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    # 3 logical CPUs per worker node: the trials need 2, one spare for a restarted trial (raycluster, SPARE);
    # a dead node noticed after 3 x 1 s health checks instead of 5 x 3 s (only how soon Ray reacts changes)
    with network_only_cluster(tmp_path_factory.mktemp("netonly"), {"w1": 3, "w2": 3},
                              RAY_health_check_period_ms="1000", RAY_health_check_failure_threshold="3") as (c, s3):
        yield c, s3


# --- what the bucket holds, read from inside the namespace (the test process cannot reach it) ------------

LIST = """
import json, sys
from pyarrow import fs
s3, path = fs.FileSystem.from_uri(sys.argv[1])
info = s3.get_file_info(fs.FileSelector(path, recursive=True, allow_not_found=True))
print(json.dumps([i.path[len(path) + 1:] for i in info if i.type == fs.FileType.File]))
"""
CELL_ROWS = """
import sys
import pyarrow.dataset as ds
from pyarrow import fs
s3, path = fs.FileSystem.from_uri(sys.argv[1])
parts = [i.path for i in s3.get_file_info(fs.FileSelector(path)) if i.base_name.startswith("part-")
         and i.base_name.endswith(".parquet")]
table = ds.dataset(parts, filesystem=s3, format="parquet").to_table()
print(table.to_pandas().to_json(orient="records"))
"""


def in_namespace(cluster: Cluster, code: str, *args: str, timeout: float = 60) -> str:
    """Run Python `code` as a process of its own in the cluster's namespace (its own /tmp), with the
    credentials every node has; returns its stdout."""
    out = subprocess.run(cluster.isolated([sys.executable, "-c", code, *args]), env=cluster.env, capture_output=True,
                         text=True, timeout=deadline(timeout))
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def objects(cluster: Cluster, uri: str) -> list[str]:
    return json.loads(in_namespace(cluster, LIST, uri))


def cells(cluster: Cluster, uri: str) -> pd.DataFrame:
    return pd.DataFrame(json.loads(in_namespace(cluster, CELL_ROWS, uri)))


def scores(df: pd.DataFrame) -> pd.Series:
    """n_correct by (model, cell) on the sweep's grid: what two runs of the same trials must agree on."""
    on_grid = df[(df["i"] <= 20) & (df["j"] <= 20) & (df["per_cell"] == 10)]
    return on_grid.set_index(["model_id", "i", "j"])["n_correct"].sort_index()


def same_scores(df: pd.DataFrame, clean: pd.DataFrame) -> str:
    """'' when `df` holds the clean run's models (ids are weight hashes) with its numbers, else what differs."""
    a, b = scores(df), scores(clean)
    if a.equals(b):
        return ""
    ours, theirs = set(df["model_id"]), set(clean["model_id"])
    if ours != theirs:
        by_run = lambda d: dict(sorted(zip(d["run_id"], d["model_id"].str[:12], strict=True)))  # noqa: E731
        return f"other models: {by_run(df)} against the clean run's {by_run(clean)}"
    diff = (a - b.reindex(a.index)).abs()
    return f"{int((diff > 0).sum())} of {len(a)} cells differ, e.g. {diff[diff > 0].head(3).to_dict()}"


def start_job(cluster: Cluster, args: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as fh:
        return subprocess.Popen(cluster.wrap([str(RAY), "job", "submit", "--address", cluster.dashboard,
                                              "--working-dir", str(ROOT), "--", *args]),
                                env=cluster.env, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)


def tail(path: Path) -> str:
    return path.read_text(errors="replace")[-4000:]


ALIVE_ACTORS = """
import json
from ray.util.state import list_actors
print(json.dumps([[a.class_name, a.node_id, a.required_resources] for a in list_actors(
    address=DASHBOARD, filters=[("state", "=", "ALIVE")], detail=True, limit=10000, raise_on_missing_output=False)]))
"""
TRAIN_WORKER_NODES = """
import json
from ray.util.state import list_actors
print(json.dumps(sorted({a.node_id for a in list_actors(address=DASHBOARD, filters=[("class_name", "=", "RayTrainWorker")],
                                                       detail=True, limit=10000, raise_on_missing_output=False)})))
"""


def node_hosting(cluster: Cluster, fragment: str, resource: str = "CPU") -> str | None:
    """The name of a live worker node that runs an actor whose class name contains `fragment` and that
    holds some of `resource` (GPU: the evaluation's GPU pool)."""
    on = {node for cls, node, needs in cluster.query(ALIVE_ACTORS)
          if fragment in cls and any(k.startswith(resource) for k in needs or {})}
    return next((name for name, node in cluster.node_ids().items() if node in on and name != "head"), None)


# --- the scenarios --------------------------------------------------------------------------------------

ISOLATION = """
import json, os, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On

@ray.remote(num_cpus=0)
def look(write):
    if write:
        open("/tmp/written-by-" + write, "w").write(write)
    root_writable = os.access("{root}", os.W_OK)
    return {"tmp": sorted(f for f in os.listdir("/tmp") if f.startswith("written-by-")), "root_writable": root_writable,
            "cwd": os.getcwd(), "aws": "AWS_ACCESS_KEY_ID" in os.environ}

nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
first = nodes[0]
ray.get(look.options(scheduling_strategy=On(first, soft=False)).remote(first[:8]))
print(json.dumps({n: ray.get(look.options(scheduling_strategy=On(n, soft=False)).remote(None)) for n in nodes}))
"""


def test_a_file_one_node_writes_under_tmp_no_other_node_sees(lab):
    """The harness's promise: a node's /tmp is its own, the checkout is read-only, the bucket's
    credentials are in every node's environment (a task on each node, placed by node id)."""
    cluster, _ = lab
    seen = cluster.query(ISOLATION.replace("{root}", str(ROOT)))
    assert len(seen) == 3  # head, w1, w2
    writer = next(n for n, v in seen.items() if v["tmp"])
    assert seen[writer]["tmp"] == [f"written-by-{writer[:8]}"]
    assert all(v["tmp"] == [] for n, v in seen.items() if n != writer), seen
    assert not any(v["root_writable"] for v in seen.values()) and all(v["aws"] for v in seen.values()), seen
    assert not Path("/tmp", f"written-by-{writer[:8]}").exists()  # nor the host
    print(f"\nisolation: /tmp/written-by-{writer[:8]} on one node, seen by {len(seen) - 1} others: none")


def test_local_storage_on_many_nodes_is_refused_before_training(lab, tmp_path):
    """A plain local --storage (present on the head, on no other node) stops before any training with
    one line that names the nodes that cannot see it and points to an object store or a shared mount."""
    cluster, _ = lab
    t0 = time.monotonic()
    out = cluster.submit([*SWEEP, "--storage", "/tmp/work/local"], timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "exit code 2" in text, text[-4000:]
    workers = {name: node for name, node in cluster.node_ids().items() if name != "head"}
    line = next((ln for ln in text.splitlines() if "--storage" in ln and all(n[:8] in ln for n in workers.values())),
                None)
    assert line and "s3://" in line and "mount" in line, text[-4000:]  # what to use instead
    assert "RayTrainWorker" not in text and not cluster.query(TRAIN_WORKER_NODES)  # nothing trained
    print(f"\nrefused in {time.monotonic() - t0:.0f}s: {line.strip()}")


@pytest.fixture(scope="module")
def clean(lab):
    """The undisturbed run: the sweep on the bucket, start to finish; (its URI, its cells, seconds)."""
    cluster, s3 = lab
    t0 = time.monotonic()
    uri = s3.uri("clean")
    out = cluster.submit([*SWEEP, "--storage", uri], timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    return uri, cells(cluster, f"{uri}/fig10_k/results"), time.monotonic() - t0


def test_sweep_on_a_bucket_trains_on_worker_nodes_and_writes_every_cell_once(lab, clean):
    cluster, s3 = lab
    uri, df, seconds = clean
    assert df["model_id"].nunique() == 2 and len(df) == CELLS and not df.duplicated(KEY).any()
    stored = objects(cluster, uri)
    checkpoints = {p.rsplit("/", 2)[0] for p in stored if "/train/" in p and "/step-" in p}
    assert len({c.split("/train/")[1].split("/")[0] for c in checkpoints}) == 2, stored[:50]  # both trials'
    assert any(p.startswith("fig10_k/results/") and p.endswith(".parquet") for p in stored)
    trained_on = set(cluster.query(TRAIN_WORKER_NODES))
    ids = cluster.node_ids()
    assert trained_on and ids["head"] not in trained_on and trained_on <= {ids["w1"], ids["w2"]}
    assert s3.secret_key not in json.dumps(stored) + df.to_json()  # no credential in names or results
    print(f"\nclean run: {len(df)} cells of {df['model_id'].nunique()} models in the bucket, trained on "
          f"{sorted(n for n, i in ids.items() if i in trained_on)}; {len(stored)} objects; {seconds:.0f}s")


def wait_for_checkpoint(cluster: Cluster, uri: str, job: subprocess.Popen, log: Path) -> None:
    """Until the job's first training checkpoint is in the bucket (the job still running)."""
    wait_for(lambda: any("/step-" in p for p in objects(cluster, f"{uri}/fig10_k/train")), 300,
             "a checkpoint in the bucket", interval=1, alive=lambda: job.poll() is None, context=lambda: tail(log))


def test_worker_nodes_lost_mid_training_and_mid_evaluation(lab, clean, tmp_path):
    """SIGKILL the node under a training trial (after its first checkpoint reached the bucket), let a
    fresh node with a (fake) GPU slot join, then SIGKILL that node under the grid evaluation (its GPU
    actor holds most of the cells), and a CPU node joins: the trials resume from the bucket's
    checkpoints, the GPU pool's missing cells run again on the CPU actors left, every cell once, the
    numbers of the undisturbed run."""
    cluster, s3 = lab
    t0 = time.monotonic()
    uri = s3.uri("nodeloss")
    job = start_job(cluster, [*SWEEP, "--storage", uri], tmp_path / "job.log")
    try:
        wait_for_checkpoint(cluster, uri, job, tmp_path / "job.log")
        victim = wait_for(lambda: node_hosting(cluster, "RayTrainWorker"), 60, "a live Train worker")
        cluster.kill_node(victim)
        killed_training = time.monotonic() - t0
        cluster.add_node("w3", num_cpus=3, num_gpus=1)
        wait_for(lambda: any(p.endswith(".parquet") for p in objects(cluster, f"{uri}/fig10_k/results")), 480,
                 "a results part in the bucket", interval=0.5, alive=lambda: job.poll() is None,
                 context=lambda: tail(tmp_path / "job.log"))
        evaluator = wait_for(lambda: node_hosting(cluster, "CellEvaluator", "GPU"), 60, "a live GPU evaluation actor",
                             interval=0.2)
        cluster.kill_node(evaluator)
        killed_eval = time.monotonic() - t0
        cluster.add_node("w4", num_cpus=3)
        assert job.wait(timeout=deadline(480)) == 0, tail(tmp_path / "job.log")
    finally:
        if job.poll() is None:
            kill_tree(job)
    df = cells(cluster, f"{uri}/fig10_k/results")
    assert len(df) == CELLS and not df.duplicated(KEY).any()
    assert same_scores(df, clean[1]) == ""  # same models (ids are weight hashes), same numbers
    log = (tmp_path / "job.log").read_text(errors="replace")
    assert "missing cells again" in log, tail(tmp_path / "job.log")
    print(f"\nnode loss: killed {victim} at {killed_training:.0f}s (training), {evaluator} at {killed_eval:.0f}s "
          f"(evaluation, its GPU pool); w3 (GPU), w4 joined; {len(df)} cells, 0 duplicates, equal to the clean run; "
          f"{time.monotonic() - t0:.0f}s")


def test_worker_node_lost_with_a_shared_directory_storage(lab, clean, tmp_path):
    """The node under a training trial SIGKILLed with `--storage` a directory every node mounts (a
    host directory outside the nodes' private /tmp, as an NFS mount would be) and a fresh node
    joining: the trial resumes from the directory's checkpoints; every cell once, the numbers of the
    clean run (on the bucket: where a sweep keeps its files does not change what it trains or
    scores)."""
    cluster, _ = lab
    t0 = time.monotonic()
    shared = Path(tempfile.mkdtemp(prefix="abacus-shared-", dir="/var/tmp"))
    log = tmp_path / "job.log"
    try:
        job = start_job(cluster, [*SWEEP, "--storage", str(shared)], log)
        try:
            wait_for(lambda: list((shared / "fig10_k" / "train").glob("*/step-*/meta.json")), 300,
                     "a checkpoint in the shared directory", interval=1,
                     alive=lambda: job.poll() is None, context=lambda: tail(log))
            victim = wait_for(lambda: node_hosting(cluster, "RayTrainWorker"), 60,
                              "a live Train worker")
            cluster.kill_node(victim)
            killed = time.monotonic() - t0
            cluster.add_node("w5", num_cpus=3)
            assert job.wait(timeout=deadline(480)) == 0, tail(log)
        finally:
            if job.poll() is None:
                kill_tree(job)
        df = read_cells(on_disk(shared / "fig10_k" / "results"))
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert len(df) == CELLS and not df.duplicated(KEY).any()
    assert same_scores(df, clean[1]) == ""
    print(f"\nshared directory: killed {victim} at {killed:.0f}s (training), w5 joined; {len(df)} "
          f"cells, equal to the clean run's; {time.monotonic() - t0:.0f}s")


def driver_of(cluster: Cluster) -> psutil.Process | None:
    """The job's driver: the `python sweeps/fig10_k.py` process on the head."""
    for p in psutil.Process(cluster.nodes["head"].pid).children(recursive=True):
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if any(a.endswith("fig10_k.py") for a in cmd) and "python" in Path(cmd[0]).name:
            return p
    return None


def test_driver_killed_and_the_same_command_rerun_resumes_from_the_bucket(lab, clean, tmp_path):
    cluster, s3 = lab
    t0 = time.monotonic()
    uri = s3.uri("driver")
    job = start_job(cluster, [*SWEEP, "--storage", uri], tmp_path / "job.log")
    try:
        wait_for_checkpoint(cluster, uri, job, tmp_path / "job.log")
        driver = wait_for(lambda: driver_of(cluster), 30, "the job's driver on the head")
        driver.kill()
        killed = time.monotonic() - t0
        assert job.wait(timeout=deadline(120)) != 0, tail(tmp_path / "job.log")
    finally:
        if job.poll() is None:
            kill_tree(job)
    out = cluster.submit([*SWEEP, "--storage", uri], timeout=600)
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "resuming" in text, text[-4000:]
    df = cells(cluster, f"{uri}/fig10_k/results")
    assert len(df) == CELLS and not df.duplicated(KEY).any()
    assert same_scores(df, clean[1]) == ""
    print(f"\ndriver killed at {killed:.0f}s, the rerun resumed from the bucket; {len(df)} cells equal to the clean "
          f"run; {time.monotonic() - t0:.0f}s")


ELSEWHERE = """
set -e
abacus-ray eval-all "$1/fig10_k" --grid cells:21-22x1-2 --per-cell 10 --num-cpus 2
abacus-ray summary "$1/fig10_k/results" > summary.txt
abacus-ray dashboard "$1/fig10_k/results" --out site
cat summary.txt
echo "LOCAL PARQUET $(find /tmp -name '*.parquet' -not -path '/tmp/ray/*' -not -path "$2/*" | wc -l)"  # $2: the checkout
echo "SITE $(wc -c < site/index.html)"
"""


def test_eval_all_summary_and_dashboard_from_a_process_that_never_ran_the_sweep(lab, clean):
    """A process with the credentials and nothing else (a fresh /tmp, no Ray cluster: its own embedded
    Ray) evaluates the bucket's checkpoints on new cells, summarises and draws the bucket's results."""
    cluster, _ = lab
    t0 = time.monotonic()
    uri = clean[0]
    out = subprocess.run(cluster.isolated(["bash", "-c", ELSEWHERE, "elsewhere", uri, str(ROOT)]), env=cluster.env,
                         capture_output=True, text=True, timeout=deadline(400))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    df = cells(cluster, f"{uri}/fig10_k/results")
    added = df[df["i"] >= 21]
    assert len(added) == 2 * 4 and not df.duplicated(KEY).any()  # 2 models x 4 new cells, the rest untouched
    assert same_scores(df, clean[1]) == ""
    assert all(m[:8] in out.stdout for m in df["model_id"].unique())  # the summary names both models
    site = int(out.stdout.split("SITE ")[1].split()[0])
    assert site > 1_000 and "LOCAL PARQUET 0" in out.stdout  # the results were read from the bucket, not copied
    print(f"\nelsewhere: eval-all added {len(added)} cells to the bucket, summary and a {site}-byte dashboard; "
          f"{time.monotonic() - t0:.0f}s")
