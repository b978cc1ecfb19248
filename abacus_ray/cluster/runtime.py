"""Connecting to Ray: an embedded local Ray on 127.0.0.1, or an existing cluster.

Ray 2.60 binds `*:port` on the machine's external address unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
makes the node IP 127.0.0.1; it enables token auth by default (the `ray job` CLI then needs matching
tokens); and it reports usage stats. These variables must be set before `import ray`, and the
processes Ray spawns inherit them. On a real multi-node cluster, start the head with
`ray start --head --node-ip-address <lan ip>` and set RAY_AUTH_MODE to what the cluster uses.
"""

from __future__ import annotations

import os

LOCAL_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # node IP 127.0.0.1: every port on loopback
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",  # the head and the `ray job` client must agree; local default: off
    "RAY_DEDUP_LOGS": "1",
}
# Only for the embedded local Ray (inherited by every process it spawns): a laptop is never drained
# or preempted, so the Train V2 preemption-watcher actor (one more process importing ray) is skipped,
# and the controller polls its workers every 0.25 s instead of 2 s, so a finished trial ends sooner.
# A long-lived embedded Ray (a driver running sweep after sweep) must not grow: no Prometheus metrics
# (the dashboard agent kept series for every finished worker, ~2.6 MB per sweep round in
# benchmarks/soak.py), and the GCS keeps a bounded history of finished tasks and dead actors.
EMBEDDED_ENV = {
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.25",
    "RAY_enable_metrics_collection": "0",
    "RAY_task_events_max_num_task_in_gcs": "5000",
    "RAY_maximum_gcs_destroyed_actor_cached_count": "500",
}


def configure_environment() -> None:
    """Set the loopback/auth/usage defaults unless the user already chose otherwise."""
    for key, value in LOCAL_ENV.items():
        os.environ.setdefault(key, value)


def init(address: str | None = None, *, num_cpus: int | None = None, num_gpus: int | None = None,
         quiet: bool = True) -> str:
    """Connect to `address` (or $RAY_ADDRESS, set inside `ray job submit`), else start a local Ray.

    Returns "local" or the address used. Idempotent: an already-initialised Ray is kept.
    """
    configure_environment()
    import ray

    if ray.is_initialized():
        return "existing"
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address and address != "local":
        ray.init(address=address, log_to_driver=not quiet)
        return address
    for key, value in EMBEDDED_ENV.items():
        os.environ.setdefault(key, value)
    ray.init(
        address="local",
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        include_dashboard=False,
        object_store_memory=int(os.environ.get("ABACUS_RAY_OBJECT_STORE_MB", "300")) * 1024**2,
        log_to_driver=not quiet,
        _node_ip_address="127.0.0.1",
    )
    return "local"


def shutdown() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


def cluster_cpus_gpus() -> tuple[float, float]:
    import ray

    res = ray.cluster_resources()
    return float(res.get("CPU", 0.0)), float(res.get("GPU", 0.0))


def quiet_data_progress() -> None:
    """Ray Data progress bars off (tests, logs); our own progress line reports evaluation."""
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.enable_operator_progress_bars = False
    ctx.print_on_execution_start = False
