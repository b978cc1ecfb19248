"""A sweep whose `--storage` is an S3 URI, on the embedded local Ray (the demo path), against a real S3
server (SeaweedFS on loopback): trials, checkpoints, sweep.json and Parquet land in the bucket and
nowhere else, MLflow's store stays on the driver's disk with the bucket URI of each checkpoint, a
rerun resumes from the bucket (its sweep.json as the previous version wrote it), and `summary`,
`eval-all` and `dashboard` work from the bucket alone.
The multi-node case (nodes with private /tmp sharing only the S3 server) is tests/test_share_nothing_cluster.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from refusal import run
from s3server import s3_fixture  # noqa: F401

from abacus_ray import storage
from abacus_ray.cli import main
from abacus_ray.evaluation.results import KEY, read_cells

pytestmark = [pytest.mark.ray, pytest.mark.cost(95)]

FLAGS = ["--preset", "tiny", "--max-trials", "1", "--seeds", "1", "--set", "train.max_steps=8",
         "--set", "eval.per_cell=2", "--grid", "cells:1-2x1-2", "--no-dashboard"]


@pytest.fixture
def bucket_ray(s3, ray_session, monkeypatch, tmp_path):
    """The S3 server's AWS variables in this process, and an embedded Ray started after them (its workers
    inherit the driver's environment: how credentials reach them on one machine)."""
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("ABACUS_RAY_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    ray = ray_session()
    ray.shutdown()
    ray_session()
    yield s3
    ray.shutdown()  # the next test's Ray starts without these variables


def test_sweep_on_s3_storage(bucket_ray, tmp_path):
    s3 = bucket_ray
    uri = s3.uri("sweeps")
    code, out, err = run(["sweep", "fig10_k", "--storage", uri, *FLAGS])
    assert code == 0, err[-3000:]
    root = storage.resolve(uri) / "fig10_k"
    names = {c.name for c in storage.listdir(root)}
    assert {"sweep.json", "tune", "train", "results"} <= names, names
    checkpoints = [m.parent for m in storage.find(root / "train", "meta.json")]
    assert checkpoints, "no checkpoint in the bucket"
    cells = read_cells(root / "results")
    assert len(cells) == 4 and not cells.duplicated(list(KEY)).any()
    assert all(c.startswith(f"s3://{s3.bucket}/sweeps/fig10_k/train/") for c in cells["checkpoint"]), cells["checkpoint"]
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith("s3:")]  # never a local folder named s3:
    db = tmp_path / "home"
    stores = list(db.rglob("mlflow.db"))
    assert len(stores) == 1 and str(stores[0]) in err  # on the driver's disk, and the path printed
    assert s3.secret_key not in err + out + storage.read_text(root / "sweep.json")

    import mlflow

    client = mlflow.tracking.MlflowClient(tracking_uri=f"sqlite:///{stores[0]}")
    runs = client.search_runs([client.get_experiment_by_name("fig10_k").experiment_id])
    assert [r.data.tags.get("checkpoint", "")[:5] for r in runs] == ["s3://"]

    record = json.loads(storage.read_text(root / "sweep.json"))  # as the previous version wrote it, whose
    for trial in record["trials"]:  # train.compile default was false (now null): nothing trained differs
        trial["train"]["compile"] = False
    storage.write_text(root / "sweep.json", json.dumps(record))
    code, _, err = run(["sweep", "fig10_k", "--storage", uri, *FLAGS])  # the same command: resumes from the bucket
    assert code == 0 and "resuming" in err and "evaluated 0 cells (4 already present)" in err, err[-3000:]
    assert len(read_cells(root / "results")) == 4

    code, text, _ = run(["summary", str(root / "results")])  # a reader with nothing local
    table = [line for line in text.splitlines() if not line.startswith("Conclusion (")]
    assert code == 0 and table[-1].split()[-1] == "4", text  # the total, above the figure's verdict
    out_uri = s3.uri("again")
    assert main(["eval-all", uri, "--grid", "cells:3x3", "--per-cell", "2", "--out", out_uri]) == 0
    assert len(read_cells(storage.resolve(out_uri))) == 1
    code, site, _ = run(["dashboard", str(root), "--out", str(tmp_path / "site")])
    assert code == 0 and Path(site.strip()).is_file()


def test_local_storage_seen_by_every_node(ray_local, tmp_path):
    """The single-node pass of the shared-directory check (a node that cannot see it: test_share_nothing_cluster.py)."""
    from abacus_ray.cluster.shared_dir import blind_nodes, check_every_node_sees

    assert blind_nodes(tmp_path / "store") == []
    check_every_node_sees(tmp_path / "store", "--storage")
    assert list((tmp_path / "store").iterdir()) == []  # the marker is gone
