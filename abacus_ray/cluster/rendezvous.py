"""The torch process-group rendezvous of a trial, without a network listener when one node suffices.

Ray Train's `TorchConfig` rendezvous (`env://` or `tcp://`) makes rank 0 host torch's c10d
`TCPStore`, and that server listens on every interface (`::`): torch has no bind-address setting and
Ray none either. On a laptop or a shared CI box that is a port open to the network for the length of
every trial. When all workers of a trial sit on one node (always, on the embedded local Ray; often
on a cluster, for 1-worker trials) they can meet through a c10d `FileStore` in that node's temp
directory instead, with gloo's and NCCL's own sockets on the loopback interface: the same process
group, nothing reachable from outside. Trials that span nodes keep Ray's TCP rendezvous; run such
clusters on a private network (docs/guide.md, "On a Ray cluster").
"""

from __future__ import annotations

import os
import tempfile
import uuid

import ray
import torch
from ray.train.torch import TorchConfig
from ray.train.torch.config import (
    _set_torch_distributed_env_vars,
    _setup_torch_process_group,
    _TorchBackend,
)


def _node_id() -> str:
    return ray.get_runtime_context().get_node_id()


def _fresh_store_path() -> str:
    """A file that does not exist yet, in the node's temp dir (a FileStore must start empty)."""
    return os.path.join(tempfile.gettempdir(), f"abacus-c10d-{uuid.uuid4().hex}")


def _loopback_sockets() -> None:
    """gloo's pair listeners and NCCL's bootstrap socket on the loopback
    interface (one node: enough)."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")


def _cuda_available() -> bool:
    return torch.cuda.is_available()


def _default_backend(worker_group, configured: str | None) -> str:
    """NCCL where every worker has CUDA, else gloo (a GPU slot without CUDA: a test's fake GPU).

    Ray Train fills in "nccl" for any trial with GPU slots; without CUDA that cannot start.
    """
    gpus = worker_group.get_resources_per_worker().get("GPU", 0) > 0
    if configured not in (None, "nccl") or not gpus:
        return configured or "gloo"
    return "nccl" if all(worker_group.execute(_cuda_available)) else "gloo"


class _SingleNodeFileRendezvous(_TorchBackend):
    """`_TorchBackend` whose `on_start` rendezvouses through a FileStore when
    the workers share a node."""

    def on_start(self, worker_group, backend_config: TorchConfig) -> None:
        if len(set(worker_group.execute(_node_id))) > 1:
            super().on_start(worker_group, backend_config)  # spans nodes: Ray's TCP rendezvous
            return
        backend = _default_backend(worker_group, backend_config.backend)
        url = "file://" + worker_group.execute_single(0, _fresh_store_path)
        worker_group.execute(_set_torch_distributed_env_vars)
        worker_group.execute(_loopback_sockets)
        ray.get(
            [
                worker_group.execute_single_async(
                    i,
                    _setup_torch_process_group,
                    backend=backend,
                    world_rank=i,
                    world_size=len(worker_group),
                    init_method=url,
                    timeout_s=backend_config.timeout_s,
                )
                for i in range(len(worker_group))
            ]
        )


class LoopbackTorchConfig(TorchConfig):
    """Pass as `TorchTrainer(torch_config=...)`: a FileStore rendezvous on one node,
    Ray's TCP one across nodes."""

    @property
    def backend_cls(self):
        return _SingleNodeFileRendezvous
