"""Where trials and evaluation actors go, checked against the cluster's
nodes before anything starts.

Ray waits forever for a placement group it cannot place, and a sweep whose trials can never fit
(1-CPU nodes under 1-CPU workers, a GPU trial on a cluster without GPUs, more workers than CPUs)
would hang without a word. So the driver checks every trial's request against the nodes that are
alive, node by node (a worker's bundle must fit on one node), fails at once with one line naming the
request and what the largest node offers, and caps how many trials run at once so that their
drivers' small CPU slices never starve their workers (docs/guide.md, "On a Ray cluster"). While a
sweep runs, `PendingWatch` says on the console when a placement group has waited longer than
`cluster.wait_warn_s`, with what is free: a cluster shared with other jobs can still make us wait.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import ray

from abacus_ray.config import ClusterConfig, ExperimentConfig
from abacus_ray.config.cluster import DRIVER_CPU

EPS = 1e-9


class PlacementError(ValueError):
    """A request no node of the cluster can ever satisfy (the CLI prints it as one line, exit 2)."""


@dataclass(frozen=True)
class Node:
    node_id: str
    resources: dict[str, float]


def alive_nodes() -> list[Node]:
    return [Node(n["NodeID"], dict(n["Resources"])) for n in ray.nodes() if n.get("Alive")]  # RAY


def worker_bundle(cl: ClusterConfig) -> dict[str, float]:
    """One Train worker's resources (a `function` trial is its own single worker)."""
    return (
        {"CPU": cl.cpus_per_worker}
        | ({"GPU": cl.gpus_per_worker} if cl.use_gpu else {})
        | cl.custom_resources
    )


def _slots(capacity: dict[str, float], bundle: dict[str, float], taken_cpu: float = 0.0) -> int:
    """How many copies of `bundle` fit on a node with `capacity`, after `taken_cpu` is used."""
    free = dict(capacity)
    free["CPU"] = free.get("CPU", 0.0) - taken_cpu
    return max(0, min(math.floor(free.get(k, 0.0) / v + EPS) for k, v in bundle.items() if v > 0))


def _fits(slots: list[int], workers: int, strategy: str, trials: int) -> bool:
    """Whether `trials` trials of `workers` workers each can be placed, given
    each node's free slots."""
    if strategy == "STRICT_PACK":
        return sum(s // workers for s in slots) >= trials
    if strategy == "STRICT_SPREAD":  # each trial's workers on distinct nodes
        return sum(min(s, trials) for s in slots) >= trials * workers
    # PACK / SPREAD: a trial's workers may share or split nodes
    return sum(slots) >= trials * workers


def _fit_with_drivers(
    cfg: ExperimentConfig, nodes: Sequence[Node], trials: int, drivers: int
) -> bool:
    """Whether `trials` trials like `cfg` fit at once beside `drivers` TorchTrainer drivers placed
    adversarially: each driver's CPU slice may land on a different node and
    cost it one worker slot."""
    cl = cfg.cluster
    bundle = worker_bundle(cl)
    full = [_slots(n.resources, bundle) for n in nodes]
    slots = full
    if drivers:
        dented = [_slots(n.resources, bundle, DRIVER_CPU * drivers) for n in nodes]
        drops = sorted(range(len(nodes)), key=lambda i: full[i] - dented[i], reverse=True)[:drivers]
        slots = [dented[i] if i in drops else full[i] for i in range(len(nodes))]
    # a `function` trial has 1 worker (config)
    return _fits(slots, cl.workers, cl.placement, trials)


def _concurrency(cfg: ExperimentConfig, nodes: Sequence[Node], limit: int) -> int:
    """The most trials like `cfg` that fit at once (0 if not even one), each torch trial's driver
    placed adversarially."""
    best = 0
    for trials in range(1, limit + 1):
        if not _fit_with_drivers(
            cfg, nodes, trials, trials if cfg.cluster.trainer == "torch" else 0
        ):
            break
        best = trials
    return best


def _shown(resources: dict[str, float], keys: Sequence[str]) -> str:
    return "{" + ", ".join(f"{k}: {resources.get(k, 0.0):g}" for k in keys) + "}"


def _largest(nodes: Sequence[Node], keys: Sequence[str]) -> dict[str, float]:
    if not nodes:
        return {}
    return max((n.resources for n in nodes), key=lambda r: tuple(r.get(k, 0.0) for k in keys))


def max_concurrency(
    configs: Sequence[ExperimentConfig], nodes: Sequence[Node] | None = None
) -> int:
    """How many trials Tune may start at once, or raise `PlacementError` naming the first trial that
    can never be placed.

    `function` trials hold nothing but their own bundle, so all may be started: Ray places each as
    soon as a node fits it, and the rest wait in Ray's queue (capping them by the scarcest shape
    left the nodes of every other shape idle: docs/performance.md, "Many nodes"). TorchTrainer
    trials add a driver each: at most as many as the shapes' slots hold together, and few enough
    that, with every driver's slice on the worst node, each shape still fits one trial (so the queue
    never deadlocks).
    """
    nodes = alive_nodes() if nodes is None else nodes
    shapes: dict = {}
    for cfg in configs:
        shapes.setdefault(cfg.cluster, [cfg, 0])[1] += 1
    fits = {}
    for cl, (cfg, count) in shapes.items():
        n = _concurrency(cfg, nodes, count)
        if n == 0:
            cl = cfg.cluster
            bundle = worker_bundle(cl)
            keys = list(bundle)
            driver = f" + {DRIVER_CPU:g} CPU for its driver" if cl.trainer == "torch" else ""
            raise PlacementError(
                f"cluster: trial {cfg.name} needs {cl.workers} worker(s) x "
                f"{_shown(bundle, keys)}{driver}, placed {cl.placement}; the largest of the "
                f"cluster's {len(nodes)} node(s) offers "
                f"{_shown(_largest(nodes, keys), keys)}: it can never start")
        fits[cl] = n
    torch_shapes = [cfg for cl, (cfg, _) in shapes.items() if cl.trainer == "torch"]
    if not torch_shapes:
        return len(configs)
    limit = min(len(configs), sum(fits.values()))
    while limit > 1 and not all(_fit_with_drivers(cfg, nodes, 1, limit) for cfg in torch_shapes):
        limit -= 1
    return limit


def eval_pools(n_items: int, cpu_actors: int | None, gpu_actors: int | None,
               nodes: Sequence[Node] | None = None) -> tuple[int, int]:
    """(GPU actors, CPU actors) for grid evaluation: by default one per whole GPU and one per whole
    CPU left beside them, counted node by node (an actor lives on one node);
    never more than items."""
    nodes = alive_nodes() if nodes is None else nodes
    gpus = sum(math.floor(n.resources.get("GPU", 0.0) + EPS) for n in nodes)
    cpus = sum(math.floor(n.resources.get("CPU", 0.0) + EPS) for n in nodes)
    g = gpus if gpu_actors is None else gpu_actors
    c = max(0, cpus - g) if cpu_actors is None else cpu_actors
    if g + c == 0 and cpus >= 1:
        c = 1
    if g > gpus or (c > 0 and cpus < 1) or g + c == 0:
        raise PlacementError(f"evaluation: {g} GPU actor(s) x {{GPU: 1}} and {c} CPU actor(s) x "
                             f"{{CPU: 1}} cannot be placed; the largest of the cluster's "
                             f"{len(nodes)} node(s) offers "
                             f"{_shown(_largest(nodes, ['CPU', 'GPU']), ['CPU', 'GPU'])}")
    g = min(g, n_items)
    return g, min(c, n_items - g)


class PendingWatch(threading.Thread):
    """Says on the console, once per placement group, when it has waited longer than `after_s`."""

    def __init__(self, after_s: float, interval_s: float = 2.0):
        super().__init__(name="abacus-pending-watch", daemon=True)
        self.after_s, self.interval_s = after_s, interval_s
        self.first_seen: dict[str, float] = {}
        self.told: set[str] = set()
        self.stopped = threading.Event()

    def check(self) -> list[str]:
        now = time.monotonic()
        lines = []
        table = ray.util.placement_group_table()  # RAY: every placement group and its state
        for pg_id, pg in table.items():
            if pg.get("state") != "PENDING":
                self.first_seen.pop(pg_id, None)
                continue
            waited = now - self.first_seen.setdefault(pg_id, now)
            if waited >= self.after_s and pg_id not in self.told:
                self.told.add(pg_id)
                bundles = list(pg.get("bundles", {}).values())
                keys = sorted({k for b in bundles for k in b})
                # RAY: what is free, node by node
                free = ray._private.state.available_resources_per_node()
                largest = _largest([Node(k, v) for k, v in free.items()], keys)
                lines.append(f"waiting {waited:.0f}s for resources: {len(bundles)} bundle(s) "
                             f"{', '.join(_shown(b, keys) for b in bundles)} "
                             f"({pg.get('strategy')}); the largest free node offers "
                             f"{_shown(largest, keys)} (other jobs or trials hold the rest)")
        return lines

    def run(self) -> None:
        while not self.stopped.wait(self.interval_s):
            try:
                for line in self.check():
                    print(line, file=sys.stderr, flush=True)
            except Exception:  # noqa: BLE001 - a console hint must never take the sweep down
                pass

    def stop(self) -> None:
        self.stopped.set()
