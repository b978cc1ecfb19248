"""Does every node of the cluster see a local storage directory? Checked before any training.

Ray Train and Tune write checkpoints and trial state from whichever node runs a trial and read them
back on the driver's: a local `--storage` works on one machine and on a mount every node shares
(NFS and the like), and fails late and confusingly on nodes that each have their own disk (a trial
trained on a worker, then "no such checkpoint directory" on the head). So the driver writes a marker
file into the directory and a task pinned to every alive node (`NodeAffinitySchedulingStrategy`)
looks for it, reading its content back; a node that cannot see it is named in one line that says
what to use instead. On one node the check passes (the driver wrote the file there).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from abacus_ray import storage

# every node runs one tiny task; a node too busy to start it within this is named
CHECK_TIMEOUT_S = 120.0


@ray.remote(num_cpus=0, max_retries=0)
def _look(path: str, token: str) -> bool:
    """On one node: whether `path` holds `token` (the driver's marker, not an old one)."""
    try:
        return storage.read_text(storage.on_disk(Path(path))) == token
    except (OSError, ValueError):
        return False


def _alive_nodes() -> list[dict]:
    return [n for n in ray.nodes() if n.get("Alive")]  # RAY: the cluster's nodes


def blind_nodes(directory: Path) -> list[str]:
    """The alive nodes that cannot read a marker the driver writes into
    `directory` (as "ip (node id)")."""
    nodes = _alive_nodes()  # one node too: a task costs well under a second and runs the same path
    token = uuid.uuid4().hex
    marker = storage.on_disk(directory / f".abacus-ray-shared-{token[:12]}")
    storage.write_text(marker, token)  # a marker only this check reads, removed below
    try:
        # RAY: one task pinned to each node, no fallback elsewhere
        refs = {
            n["NodeID"]: _look.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            ).remote(marker.path, token)
            for n in nodes
        }
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=CHECK_TIMEOUT_S)
        blind = []
        for n in nodes:
            ref = refs[n["NodeID"]]
            seen = False
            if ref in ready:
                try:
                    seen = ray.get(ref)
                except ray.exceptions.RayError:
                    seen = False
            if not seen:
                blind.append(f"{n.get('NodeManagerAddress', '?')} ({n['NodeID'][:8]})")
        return blind
    finally:
        storage.delete(marker, quiet=True)


def check_every_node_sees(directory: Path, flag: str) -> None:
    """Refuse a local storage directory that some node of the cluster cannot see (one
    line, before training)."""
    blind = blind_nodes(directory)
    if blind:
        raise ValueError(f"{flag}: {directory} is a local directory that {len(blind)} of "
                         f"{len(_alive_nodes())} node(s) cannot see: {', '.join(blind)}; use an "
                         "object store URI (s3://BUCKET/PREFIX, gs://...) or a directory every "
                         "node mounts (docs/guide.md, \"Cluster without a shared file system\")")
