"""Scheduling arithmetic over Ray's own records of a sweep (tests/test_many_nodes.py): which trial
held which node when, whether each fit its node, how full the trial slots were, and whether a node
sat idle while a trial that fits it waited.

A trial is its Tune trial actor, seen through its tasks (`list_tasks`: the actor's creation task with
its node id, worker pid and required resources, then its method calls, each with start and end times
in ms); a node's slots are its custom resource (the GPU kind it stands for). Everything here is plain
arithmetic on those records, so the assertions can be read and checked by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

EPS = 1e-9
KINDS = ("h100", "a4000", "l4", "cpu_pool")  # the custom resources standing for GPU kinds and CPU pools


@dataclass(frozen=True)
class Held:
    """One trial's tenure of a node: its actor's life."""

    node: str
    need: dict[str, float]
    start: float  # seconds
    end: float
    pid: int


def base_resources(required: dict[str, float]) -> dict[str, float]:
    """An actor's request with Ray's placement-group names folded back (`h100_group_0_<pg>` -> `h100`)."""
    need: dict[str, float] = {}
    for k, v in (required or {}).items():
        base = re.sub(r"_group_(\d+_)?[0-9a-f]+$", "", k)
        if base == "bundle":  # the placement group's own marker resource, not something a node offers
            continue
        need[base] = max(need.get(base, 0.0), float(v))
    return need


def trials_from_tasks(tasks: list[dict]) -> list[Held]:
    """The Tune trial actors (the only actors that ask for a kind) as tenures: from the start of the
    actor's creation task to the end of its last method call (Tune's `train` and `stop`), on the node
    and with the resources of its creation task."""
    by_actor: dict[str, list[dict]] = {}
    for t in tasks:
        if t["actor"] and t["start"] and t["end"]:
            by_actor.setdefault(t["actor"], []).append(t)
    out = []
    for calls in by_actor.values():
        create = next((t for t in calls if t["type"] == "ACTOR_CREATION_TASK"), None)
        if create is None:
            continue
        need = base_resources(create["resources"])
        # an actor's tasks all run in its one process; a record may lack the node or pid, another has it
        node = next((t["node"] for t in [create, *calls] if t["node"]), None)
        pid = next((t["pid"] for t in [create, *calls] if t["pid"]), None)
        if any(k in need for k in KINDS):
            out.append(Held(node, need, min(t["start"] for t in calls) / 1000.0,
                            max(t["end"] for t in calls) / 1000.0, pid))
    return out


def kind_of(need: dict[str, float]) -> str:
    return next(k for k in KINDS if k in need)


def fits(capacity: dict[str, float], need: dict[str, float]) -> bool:
    return all(capacity.get(k, 0.0) + EPS >= v for k, v in need.items())


def overfull(trials: list[Held], nodes: dict[str, dict[str, float]]) -> list[str]:
    """Moments where the trials on a node asked for more than it has (must be none)."""
    bad = []
    for t in trials:
        at = t.start + EPS
        load: dict[str, float] = {}
        for o in trials:
            if o.node == t.node and o.start <= at < o.end:
                for k, v in o.need.items():
                    load[k] = load.get(k, 0.0) + v
        if not fits(nodes[t.node], load):
            bad.append(f"{t.node[:8]} at {at:.1f}: {load} > {nodes[t.node]}")
    return bad


def utilisation(trials: list[Held], nodes: dict[str, dict[str, float]]) -> tuple[float, float]:
    """(Slot utilisation, span in s): the slots' busy time over (all slots x the sweep's span), a
    node's slots being its amount of its kind and a trial taking what it asked for of it."""
    span0, span1 = min(t.start for t in trials), max(t.end for t in trials)
    slots = sum(r.get(k, 0.0) for r in nodes.values() for k in KINDS)
    busy = sum((t.end - t.start) * t.need[kind_of(t.need)] for t in trials)
    return busy / (slots * (span1 - span0)), span1 - span0


def free_while_waiting(trials: list[Held], nodes: dict[str, dict[str, float]]) -> float:
    """The longest time (s) any node had room for a trial that was still waiting.

    Every trial is queued when the sweep starts (the first trial's start: Tune asks for all
    placement groups at once), and waits until its actor starts; a node has room for it while the
    trials it holds leave enough of the trial's kind free. Measured per (trial, node) pair, summed over
    the trial's wait: the handovers between one trial and the next count, so this is Ray's and
    Tune's scheduling latency, not zero.
    """
    t0 = min(t.start for t in trials)
    worst = 0.0
    for waiting in trials:
        for node, capacity in nodes.items():
            if not fits(capacity, waiting.need):
                continue
            ours = [t for t in trials if t.node == node and t is not waiting]
            edges = sorted({t0, waiting.start, *(x for t in ours for x in (t.start, t.end) if t0 < x < waiting.start)})
            free = 0.0
            for a, b in zip(edges, edges[1:], strict=False):
                mid = (a + b) / 2
                load: dict[str, float] = {}
                for t in ours:
                    if t.start <= mid < t.end:
                        for k, v in t.need.items():
                            load[k] = load.get(k, 0.0) + v
                left = {k: capacity.get(k, 0.0) - load.get(k, 0.0) for k in capacity}
                if fits(left, waiting.need):
                    free += b - a
            worst = max(worst, free)
    return worst
