"""Scheduling arithmetic over Ray's own records of a sweep (tests/test_multinode.py, the mixed-shapes
scenario; tests/test_many_nodes.py at 9 raylets): which trial held which node when, whether each fit
its node, how full the trial slots were, and how long a node had room for a trial that still waited.

A trial is its Tune trial actor, seen through its tasks (`list_tasks`: the actor's creation task with
its node id, worker pid and required resources, then its method calls, each with start and end times
in ms); a node's slots are its custom resource (the GPU kind it stands for). Everything here is plain
arithmetic on those records, so the assertions can be read and checked by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What a client of the cluster asks Ray's state API for (run by `raycluster.Cluster.query`): the live
# nodes' resources and every actor task (creation and method calls) with its node, process and times.
RECORDS = """
import json
from ray.util.state import list_tasks
nodes = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}
tasks = [t for kind in ("ACTOR_CREATION_TASK", "ACTOR_TASK") for t in list_tasks(
    address=DASHBOARD, filters=[("type", "=", kind)], detail=True, limit=10000, raise_on_missing_output=False)]
print(json.dumps({"nodes": nodes, "tasks": [
    {"actor": t.actor_id, "type": t.type, "name": t.func_or_class_name, "node": t.node_id, "pid": t.worker_pid,
     "resources": t.required_resources, "start": t.start_time_ms, "end": t.end_time_ms} for t in tasks]}))
"""

EPS = 1e-9
KINDS = ("h100", "a4000", "l4", "accel", "cpu_pool")  # the custom resources standing for GPU kinds and CPU pools


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
    """The `function` trials' Tune actors (`ImplicitFunc`) that ask for a kind, as tenures: from the
    start of the actor's creation task to the end of its last method call (Tune's `train` and `stop`),
    on the node and with the resources of its creation task. (A TorchTrainer trial's Tune actor asks for
    no kind, and its Train workers are not trials: other jobs on the same cluster are left out.)"""
    by_actor: dict[str, list[dict]] = {}
    for t in tasks:
        if t["actor"] and t["start"] and t["end"] and (t["name"] or "").startswith("ImplicitFunc"):
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


def load_at(trials: list[Held], at: float) -> dict[str, float]:
    """What the trials holding a node at moment `at` asked for, summed per resource."""
    load: dict[str, float] = {}
    for t in trials:
        if t.start <= at < t.end:
            for k, v in t.need.items():
                load[k] = load.get(k, 0.0) + v
    return load


def overfull(trials: list[Held], nodes: dict[str, dict[str, float]]) -> list[str]:
    """Moments where the trials on a node asked for more than it has (must be none)."""
    bad = []
    for t in trials:
        at = t.start + EPS
        load = load_at([o for o in trials if o.node == t.node], at)
        if not fits(nodes[t.node], load):
            bad.append(f"{t.node[:8]} at {at:.1f}: {load} > {nodes[t.node]}")
    return bad


def utilisation(trials: list[Held], nodes: dict[str, dict[str, float]],
                while_waiting: bool = False) -> tuple[float, float]:
    """(Slot utilisation, span in s): the slots' busy time over (all slots x the span), a node's slots
    being its amount of its kind and a trial taking what it asked for of it.

    The span is the sweep's, first start to last end; `while_waiting` ends it where the last trial
    started, when the last trial stopped waiting: on a cluster of a few slots the last wave's ragged
    end (one kind's trials done before another's) is a large share of the whole span, and says how the
    sweep's trials line up, not whether the scheduler left a slot idle while a trial waited."""
    span0 = min(t.start for t in trials)
    span1 = max(t.start for t in trials) if while_waiting else max(t.end for t in trials)
    slots = sum(r.get(k, 0.0) for r in nodes.values() for k in KINDS)
    busy = sum((min(t.end, span1) - t.start) * t.need[kind_of(t.need)] for t in trials if t.start < span1)
    return busy / (slots * (span1 - span0)), span1 - span0


def longest_room_while_waiting(trials: list[Held], nodes: dict[str, dict[str, float]]) -> float:
    """The longest stretch (s) during which one node had room for a trial that was still waiting.

    Every trial is queued when the sweep starts (the first trial's start: Tune asks for all
    placement groups at once) and waits until its actor starts; a node has room for it while the
    trials it holds leave enough of the trial's kind free. A stretch ends when the room is taken (by
    this trial or another) or the trial starts, so each stretch is one hand-over: Ray's and Tune's
    latency between a slot's last trial ending and the next one starting there. Stretches are not
    summed over a trial's wait: a trial queued behind two waves sees two hand-overs, and their sum
    says nothing about how fast either was.
    """
    t0 = min(t.start for t in trials)
    worst = 0.0
    for waiting in trials:
        for node, capacity in nodes.items():
            if not fits(capacity, waiting.need):
                continue
            ours = [t for t in trials if t.node == node and t is not waiting]
            edges = sorted({t0, waiting.start, *(x for t in ours for x in (t.start, t.end) if t0 < x < waiting.start)})
            stretch = 0.0
            for a, b in zip(edges, edges[1:], strict=False):
                load = load_at(ours, (a + b) / 2)
                left = {k: capacity.get(k, 0.0) - load.get(k, 0.0) for k in capacity}
                stretch = stretch + (b - a) if fits(left, waiting.need) else 0.0
                worst = max(worst, stretch)
    return worst


def refusal_problems(out, storage, n_nodes: int) -> list[str]:
    """How the `ray job submit` of `tests/cluster_sweeps/impossible.py` (`out`, a CompletedProcess) falls
    short of a refusal before Tune starts, in one line naming the trial and the largest of `n_nodes`."""
    if out.returncode == 0:
        return ["the job succeeded"]
    # `ray job submit` shows the job's log twice (tailed, then in the failure message): one distinct line
    lines = {line for line in (out.stdout + out.stderr).splitlines() if "can never start" in line}
    if len(lines) != 1:
        return [f"{len(lines)} distinct refusal lines:\n" + out.stdout[-3000:] + out.stderr[-3000:]]
    line = lines.pop()
    want = ("abacus-ray sweep: error: cluster: trial impossible/resources=cpu_pool:64 needs 1 worker(s) x "
            "{CPU: 1, cpu_pool: 64}")
    problems = [] if line.startswith(want) else [f"refusal line {line!r}"]
    if f"the largest of the cluster's {n_nodes} node(s) offers" not in line:
        problems.append(f"refusal line {line!r} does not name the largest of {n_nodes} nodes")
    if (storage / "impossible" / "tune").exists():
        problems.append("Tune started")
    return problems


@dataclass(frozen=True)
class Schedule:
    """A sweep's schedule judged from Ray's records (`RECORDS`) and the sweep's own `cluster.parquet`."""

    trials: list[Held]
    nodes: dict[str, dict[str, float]]
    busy: float  # the slots' busy fraction over the sweep's span (`utilisation`)
    busy_while_waiting: float  # ... up to the last trial's start
    span: float  # s
    longest_room: float  # s (`longest_room_while_waiting`)

    @classmethod
    def of(cls, records: dict) -> Schedule:
        nodes = {n: {k: float(v) for k, v in r.items()} for n, r in records["nodes"].items()}
        trials = trials_from_tasks(records["tasks"])
        busy, span = utilisation(trials, nodes)
        return cls(trials, nodes, busy, utilisation(trials, nodes, while_waiting=True)[0], span,
                   longest_room_while_waiting(trials, nodes))

    def problems(self, n_trials: int, table: list[dict], room_bound_s: float, min_busy: float,
                 while_waiting: bool = False) -> list[str]:
        """Every way the schedule falls short (none, for a pass): each trial on a node of its kind that
        it never overfilled, the slots `min_busy` busy (over the whole span, or `while_waiting`), no
        stretch of room for a waiting trial longer than `room_bound_s`, and the sweep's `cluster.parquet`
        rows naming the node Ray ran each on."""
        out = []
        if len(self.trials) != n_trials or not all(t.node in self.nodes for t in self.trials):
            out.append(f"{len(self.trials)} trial actors with known nodes, expected {n_trials}")
        out += [f"{t} on {self.nodes.get(t.node)}" for t in self.trials
                if not all(self.nodes.get(t.node, {}).get(k, 0.0) >= v for k, v in t.need.items())]
        out += overfull(self.trials, self.nodes)
        busy = self.busy_while_waiting if while_waiting else self.busy
        if busy < min_busy:
            out.append(f"slots {busy:.1%} busy{' while trials waited' if while_waiting else ''} < {min_busy:.0%}")
        if self.longest_room > room_bound_s:
            out.append(f"a node had room for a waiting trial for {self.longest_room:.1f} s > {room_bound_s:.1f} s")
        by_pid = {t.pid: t.node for t in self.trials}
        if len(table) != n_trials or any(r["status"] != "finished" for r in table):
            out.append(f"cluster.parquet: {len(table)} rows, statuses {sorted({r['status'] for r in table})}")
        out += [f"cluster.parquet: {r['run']} on {r['node_id'][:8]}, Ray says {str(by_pid.get(r['pid']))[:8]}"
                for r in table if by_pid.get(r["pid"]) != r["node_id"]]
        return out

    def lanes(self) -> str:
        """Each node's tenures in seconds from the first start, kind and (start, end): for a failure message."""
        t0 = min(t.start for t in self.trials)
        return "; ".join(f"{node[:6]}: " + " ".join(f"{kind_of(t.need)}:{t.need[kind_of(t.need)]:g}"
                                                    f"({t.start - t0:.1f}-{t.end - t0:.1f})"
                                                    for t in sorted(self.trials, key=lambda t: t.start) if t.node == node)
                         for node in sorted({t.node for t in self.trials}))
