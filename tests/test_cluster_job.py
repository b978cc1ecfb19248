"""`ray job submit` to a `ray start` head runs a sweep file end to end, and only with the cluster's token.

The head runs as a real cluster would (`tests/raycluster.py`): token auth, its own temp dir, inside a
loopback-only network namespace (without the embedded Ray's loopback switch, Ray binds `*:port`).
"""

import os

import pytest
from raycluster import RAY, Cluster, Namespace, new_token

from abacus_ray.evaluation.results import read_cells

pytestmark = [pytest.mark.ray, pytest.mark.cost(100)]


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    import ray

    ray.shutdown()  # the in-process test Ray would compete for the 2 cores
    ns = Namespace()
    cluster = Cluster(tmp_path_factory.mktemp("head"), ns)
    try:
        yield cluster.start_head(num_cpus=2)
    finally:
        cluster.stop()
        ns.close()


def test_job_submit_runs_fig10(head, tmp_path):
    storage = tmp_path / "storage"
    out = head.submit(["python", "sweeps/fig10_k.py", "--preset", "tiny", "--storage", str(storage), "--max-trials", "2",
                       "--set", "train.max_steps=10", "--set", "eval.per_cell=2", "--grid", "cells:1-2x1-2",
                       "--no-dashboard"])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "succeeded" in out.stdout + out.stderr
    df = read_cells(storage / "fig10_k" / "results")
    assert df["model_id"].nunique() == 2 and len(df) == 8


@pytest.mark.parametrize("token", ["none", "wrong"])
def test_job_without_the_clusters_token_is_refused(head, tmp_path, token):
    """Token auth is on: a client without the token, or with another one, cannot submit code to run."""
    env = dict(head.env)
    env.pop("RAY_AUTH_TOKEN_PATH")
    env["HOME"] = str(tmp_path)  # no ~/.ray/auth_token to fall back on
    if token == "wrong":
        env["RAY_AUTH_TOKEN_PATH"] = str(new_token(tmp_path))
    marker = tmp_path / "ran"
    out = head.run([str(RAY), "job", "submit", "--address", head.dashboard, "--", "touch", str(marker)],
                   env=env, timeout=120)
    assert out.returncode != 0
    assert "401" in out.stdout + out.stderr or "auth" in (out.stdout + out.stderr).lower()
    assert not marker.exists()
    listed = head.run([str(RAY), "job", "list", "--address", head.dashboard], timeout=120)  # with the token
    assert listed.returncode == 0 and str(marker) not in listed.stdout + listed.stderr
    assert os.environ.get("RAY_AUTH_MODE") == "token"
