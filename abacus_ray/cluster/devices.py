"""Where a sweep's trials train, decided once: after connecting to Ray, before any trial is built.

`cluster.use_gpu` unset (auto) becomes true on every trial's config when the connected cluster has a
GPU on a node that also holds the trial's custom resources (`cluster.resources`: a `cpu_pool:1`
trial stays on the CPU nodes), false otherwise; set values stay. So a paper-scale sweep submitted to
a GPU cluster trains on its GPUs without flags, the embedded Ray of a CPU machine trains on CPUs as
before, and no trial (nor `sweep.json`, nor a results row) sees the unset value. The driver's first
line says what was decided and, for trials on CPUs, what they cost there: `price` (the command line
passes `abacus_ray.plan.cpu_price_words`, core-hours from one core's measured speed; plan sits
beside this layer, so it is handed in).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence

import ray

from abacus_ray.cluster.placement import Node
from abacus_ray.config import ClusterConfig, ExperimentConfig
from abacus_ray.sweep import Trial

# (the configs of trials on CPUs, the cluster's CPUs) -> their cost in words
Price = Callable[[Sequence[ExperimentConfig], int], str]


def gpus_for(cluster: ClusterConfig, nodes: Sequence[Node]) -> float:
    """The GPUs of the nodes that hold every custom resource a worker of `cluster` asks for."""
    needs = cluster.custom_resources
    return sum(
        n.resources.get("GPU", 0.0)
        for n in nodes
        if all(n.resources.get(k, 0.0) >= v for k, v in needs.items())
    )


def resolve_trials(trials: Sequence[Trial], nodes: Sequence[Node]) -> list[Trial]:
    """`trials` with `cluster.use_gpu` concrete for a cluster of `nodes` (`gpus_for`)."""
    out = []
    for t in trials:
        cl = t.config.cluster
        out.append(
            dataclasses.replace(
                t, config=t.config.replace(cluster=cl.resolved(gpus_for(cl, nodes)))
            )
        )
    return out


def _cluster_words(nodes: Sequence[Node]) -> str:
    gpus = sum(n.resources.get("GPU", 0.0) for n in nodes)
    cpus = sum(n.resources.get("CPU", 0.0) for n in nodes)
    with_gpu = sum(1 for n in nodes if n.resources.get("GPU", 0.0) > 0)
    where = f"{gpus:g} GPU(s) on {with_gpu} of {len(nodes)} node(s)" if gpus else "no GPUs"
    return f"{where}, {cpus:g} CPU(s)"


def _setting(given: Sequence[Trial]) -> str:
    values = {t.config.cluster.use_gpu for t in given}
    if len(values) > 1:
        return "as each trial sets it"
    value = values.pop() if values else None
    return "cluster.use_gpu=" + ("auto" if value is None else str(value).lower())


def device_line(
    name: str,
    given: Sequence[Trial],
    resolved: Sequence[Trial],
    nodes: Sequence[Node],
    price: Price | None = None,
) -> str:
    """The sweep's line on where its trials train; trials on CPUs with their planned cost there."""
    on_gpu = sum(1 for t in resolved if t.config.cluster.use_gpu)
    on_cpu = [t for t in resolved if not t.config.cluster.use_gpu]
    if not on_cpu:
        where = "trials train on GPUs"
    elif on_gpu:
        where = f"{on_gpu} of {len(resolved)} trials train on GPUs, {len(on_cpu)} on CPUs"
    else:
        where = "trials train on CPUs"
    line = f"{name}: cluster: {_cluster_words(nodes)}: {where} ({_setting(given)})"
    if on_cpu and price is not None:
        cores = max(1, int(sum(n.resources.get("CPU", 0.0) for n in nodes)))
        line += "; " + price([t.config for t in on_cpu], cores)
    return line


def resolve_devices(name: str, trials: Sequence[Trial], price: Price | None = None) -> list[Trial]:
    """The trials with `cluster.use_gpu` decided by the connected cluster; says so on stderr."""
    nodes = [Node(n["NodeID"], dict(n["Resources"])) for n in ray.nodes() if n.get("Alive")]  # RAY
    resolved = resolve_trials(trials, nodes)
    print(device_line(name, trials, resolved, nodes, price), file=sys.stderr, flush=True)
    return resolved
