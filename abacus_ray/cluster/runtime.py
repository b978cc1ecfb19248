"""Connecting to Ray: an embedded local Ray on 127.0.0.1, or an existing
cluster, always with token auth.

Two kinds of settings, kept apart so that nothing meant for the embedded Ray reaches a cluster:

- `CLUSTER_ENV`, set (unless the user chose otherwise) for every Ray this package talks to: token
  authentication on (Ray's `RAY_AUTH_MODE=token`; a cluster without it runs any job from anyone who
  can reach its dashboard port), no usage reporting, deduplicated logs.
- `EMBEDDED_ENV`, only while starting the embedded single-node Ray: every port on loopback
  (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`, which would also stop other nodes from joining, so it
  never leaves this function) and Train settings for a laptop. Ray's processes inherit them when
  they are spawned; the driver's own environment is restored afterwards, so a `ray start` run from
  the same process (a test's cluster, a user's script) gets none of them.

The embedded Ray needs a token like any cluster: Ray's own sources first (`RAY_AUTH_TOKEN`,
`RAY_AUTH_TOKEN_PATH`, `~/.ray/auth_token`), else a fresh random one for this process only, kept in
its environment and written nowhere. Clusters: docs/guide.md, "On a Ray cluster".
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from abacus_ray import plugins, text

PROBE_TIMEOUT_S = 3.0  # a head that does not accept a connection in this long is refused
CLUSTER_ENV = {
    # the head, every node and every client must use the same mode and token
    "RAY_AUTH_MODE": "token",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "1",
}
# Only for the embedded local Ray (inherited by every process it spawns). Loopback: with this
# variable at 0, Ray takes 127.0.0.1 as the node's address and binds its GCS, raylet, agents and
# workers there (measured: without it they listen on `::`). A laptop is never drained or preempted,
# so the Train V2 preemption-watcher actor (one more process importing ray) is skipped, and the
# controller polls its workers every 0.25 s instead of 2 s, so a finished trial ends sooner. A
# long-lived embedded Ray (a driver running sweep after sweep) must not grow: no Prometheus metrics
# (the dashboard agent kept series for every finished worker, ~2.6 MB per sweep round in
# benchmarks/soak.py), and the GCS keeps a bounded history of finished tasks and dead actors.
EMBEDDED_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.25",
    "RAY_enable_metrics_collection": "0",
    "RAY_task_events_max_num_task_in_gcs": "5000",
    "RAY_maximum_gcs_destroyed_actor_cached_count": "500",
}


def configure_environment() -> None:
    """Token auth, no usage stats, deduplicated logs, unless the user already chose otherwise."""
    for key, value in CLUSTER_ENV.items():
        os.environ.setdefault(key, value)


def token_source() -> str | None:
    """Where Ray would read this process's auth token from (never the token itself), or None."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return "RAY_AUTH_TOKEN_PATH"
    if (Path.home() / ".ray" / "auth_token").is_file():
        return "~/.ray/auth_token"
    return None


def ensure_token() -> None:
    """Give this process a token if token auth is on and Ray would find
    none (a fresh random one)."""
    if os.environ.get("RAY_AUTH_MODE", "token").lower() != "token" or token_source() is not None:
        return
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)  # 256 bits, as Ray's own generator


def check_address(address: str | None, flag: str = "--address") -> None:
    """Refuse, in one line naming `flag` and before anything is created, a cluster this process
    cannot join: no auth token to present (token auth is on for every cluster, `CLUSTER_ENV`), a
    token file that is not there, or a head that does not answer on its port within seconds. None
    or "local" (the embedded Ray, which makes its own token) and "auto" pass. The token is never
    read or printed."""
    configure_environment()
    if address in (None, "", "local", "auto"):
        return
    hint = ("set RAY_AUTH_TOKEN to the cluster's token, or RAY_AUTH_TOKEN_PATH to a file holding "
            "it (or put it in ~/.ray/auth_token), as on the cluster's nodes")
    if os.environ.get("RAY_AUTH_MODE", "token").lower() == "token":
        source = token_source()
        if source is None:
            raise ValueError(f"{flag}: {address}: no Ray auth token to join it with; {hint}")
        path = os.environ.get("RAY_AUTH_TOKEN_PATH")
        if source == "RAY_AUTH_TOKEN_PATH" and not Path(path).expanduser().is_file():
            raise ValueError(f"{flag}: {address}: RAY_AUTH_TOKEN_PATH names no file ({path}); "
                             f"{hint}")
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{flag}: {address!r} is not HOST:PORT (or ray://HOST:PORT, auto, local)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as e:
        raise ValueError(f"{flag}: cannot reach the Ray head at {host}:{port} ({e.strerror or e}); "
                         "is the cluster up and the address its GCS port (ray start --head prints "
                         "it)?") from None


@contextlib.contextmanager
def _embedded_settings() -> Iterator[None]:
    """`EMBEDDED_ENV` in the environment while Ray spawns its processes;
    the caller's restored after.

    The loopback switch is also read once, at `import ray`, into `ray_constants.ENABLE_RAY_CLUSTER`,
    which decides the address Ray binds; the driver has usually imported Ray already, so that value
    is set here too (a private constant: `tests/test_loopback_listeners.py` fails if Ray stops
    honouring it).
    """
    # Ray reads its settings once imported: after ours
    import ray._private.ray_constants as ray_constants

    saved = {key: os.environ.get(key) for key in EMBEDDED_ENV}
    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    for key, value in EMBEDDED_ENV.items():
        os.environ.setdefault(key, value)
    ray_constants.ENABLE_RAY_CLUSTER = os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] != "0"
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def init(address: str | None = None, *, num_cpus: int | None = None, num_gpus: int | None = None,
         quiet: bool = True) -> str:
    """Connect to `address` (or $RAY_ADDRESS, set inside `ray job submit`), else start a local Ray.

    Returns "local" or the address used. Idempotent: an already-initialised Ray is kept.
    """
    configure_environment()
    import ray  # only now: Ray reads CLUSTER_ENV when it is first imported

    if ray.is_initialized():
        return "existing"
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address and address != "local":
        # the cluster's token: docs/guide.md, "On a Ray cluster"
        ray.init(address=address, log_to_driver=not quiet, runtime_env=_job_env())
        return address
    ensure_token()
    for attempt in (1, 2):
        try:
            with _embedded_settings():
                ray.init(
                    address="local",
                    num_cpus=num_cpus,
                    num_gpus=num_gpus,
                    include_dashboard=False,
                    object_store_memory=int(os.environ.get("ABACUS_RAY_OBJECT_STORE_MB", "300"))
                    * 1024**2,
                    log_to_driver=not quiet,
                    _node_ip_address="127.0.0.1",
                    runtime_env=_job_env(),
                )
            break
        except Exception as e:  # RAY: a local node that does not come up is a bare Exception
            ray.shutdown()  # what did start (GCS, a raylet) goes, so a retry starts clean
            if attempt == 2 or "timed out" not in str(e):  # only a slow start is worth a retry
                raise OSError(f"the embedded local Ray did not start ({text.reason(e)}); retry "
                              "on a quieter machine, or give --address of a running cluster"
                              ) from None
            print(f"abacus-ray: the embedded local Ray did not start ({text.reason(e)}); "
                  "starting it once more", file=sys.stderr)
    return "local"


def _job_env() -> dict | None:
    """What travels with the job to every worker: the plugin files this driver loaded by path
    (`abacus_ray.plugins`), so that a trial or an evaluator imports them as the driver did."""
    files = plugins.files()
    return {"py_modules": files} if files else None  # RAY: shipped with the job


def shutdown() -> None:
    import ray  # as in `init`: this module never imports Ray before its settings are in place

    if ray.is_initialized():
        ray.shutdown()


def quiet_data_progress() -> None:
    """Ray Data progress bars off (tests, logs); our own progress line reports evaluation."""
    import ray.data  # as in `init`

    ctx = ray.data.DataContext.get_current()
    # Ray Data says once, at WARNING, that its bars are off: not about the user's run.
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)
    ctx.enable_progress_bars = False
    ctx.enable_operator_progress_bars = False
    ctx.print_on_execution_start = False
