"""`cluster.use_gpu` unset (auto): decided once by the connected cluster's GPUs, on every trial.

The decision is a pure function of the nodes' resources (`cluster/devices.resolve_trials`), checked
here on hand-made node lists as Ray reports them; the line the sweep prints first, with the plan's
CPU cost; the config's round trip of the unset value; and an older `sweep.json` (which recorded
`false`, the old default) still resuming on a CPU cluster; `train` without Ray recording where
`--device` put the run. No Ray is started.
"""

from __future__ import annotations

import pytest

from abacus_ray.config import ExperimentConfig, preset
from abacus_ray.config.identity import sweep_change
from abacus_ray.plan import cpu_price_words
from abacus_ray.storage import on_disk
from abacus_ray.sweep import Trial


def nodes(*resources: dict[str, float]):
    from abacus_ray.cluster.placement import Node

    return [Node(f"n{i}", r) for i, r in enumerate(resources)]


GPU_CLUSTER = ({"CPU": 16, "GPU": 2, "h100": 2}, {"CPU": 8, "cpu_pool": 8})
CPU_CLUSTER = ({"CPU": 2, "memory": 8e9},)


def trials(*overrides: list[str], name: str = "paper") -> list[Trial]:
    return [Trial(preset(name, [*o, f"name=s/{i}"]), {}) for i, o in enumerate(overrides)]


def test_auto_trains_on_gpus_exactly_when_the_cluster_has_any():
    from abacus_ray.cluster.devices import resolve_trials

    given = trials([], ["cluster.use_gpu=false"], ["cluster.use_gpu=true"])
    assert [t.config.cluster.use_gpu for t in given] == [None, False, True]
    on_gpus = resolve_trials(given, nodes(*GPU_CLUSTER))
    assert [t.config.cluster.use_gpu for t in on_gpus] == [True, False, True]  # a set value stays
    on_cpus = resolve_trials(given, nodes(*CPU_CLUSTER))
    assert [t.config.cluster.use_gpu for t in on_cpus] == [False, False, True]
    unchanged = on_gpus[0].config.replace(cluster=given[0].config.cluster)
    assert unchanged == given[0].config  # nothing but cluster.use_gpu
    tiny = resolve_trials(trials([], name="tiny"), nodes(*GPU_CLUSTER))
    assert tiny[0].config.cluster.use_gpu is False  # the CPU preset says so itself


def test_auto_counts_only_the_gpus_of_nodes_holding_the_trials_custom_resources():
    """A `cpu_pool:1` trial on a cluster whose `cpu_pool` nodes have no GPU trains on CPUs (a GPU
    asked for there could never be placed); an `h100:1` trial finds the GPUs."""
    from abacus_ray.cluster.devices import resolve_trials

    given = trials(["cluster.resources=cpu_pool:1"], ["cluster.resources=h100:1"])
    resolved = resolve_trials(given, nodes(*GPU_CLUSTER))
    assert [t.config.cluster.use_gpu for t in resolved] == [False, True]


def test_the_first_line_says_where_trials_train_and_prices_cpu_trials():
    from abacus_ray.cluster.devices import device_line, resolve_trials

    given = trials([], [])
    gpu = device_line(
        "fig10_k",
        given,
        resolve_trials(given, nodes(*GPU_CLUSTER)),
        nodes(*GPU_CLUSTER),
        cpu_price_words,
    )
    assert gpu == (
        "fig10_k: cluster: 2 GPU(s) on 1 of 2 node(s), 24 CPU(s): trials train on GPUs "
        "(cluster.use_gpu=auto)"
    )
    cpu = device_line(
        "fig10_k",
        given,
        resolve_trials(given, nodes(*CPU_CLUSTER)),
        nodes(*CPU_CLUSTER),
        cpu_price_words,
    )
    head, _, plan = cpu.partition("; plan: ")
    assert (
        head == "fig10_k: cluster: no GPUs, 2 CPU(s): trials train on CPUs (cluster.use_gpu=auto)"
    )
    core_hours = float(plan.split(" core-hours")[0].replace(",", ""))
    assert core_hours > 1_000 and plan.endswith(
        " wall-hours on 2 CPUs"
    )  # the paper's budget, on CPUs
    mixed = trials([], ["cluster.use_gpu=false"])
    line = device_line("x", mixed, resolve_trials(mixed, nodes(*GPU_CLUSTER)), nodes(*GPU_CLUSTER))
    assert line.endswith(": 1 of 2 trials train on GPUs, 1 on CPUs (as each trial sets it)"), line


@pytest.mark.parametrize("text", ["auto", "AUTO", "null", ""])
def test_unset_use_gpu_round_trips_as_null_and_is_given_as_auto(text):
    cfg = preset("paper", [f"cluster.use_gpu={text}"])
    assert cfg.cluster.use_gpu is None and cfg.to_dict()["cluster"]["use_gpu"] is None
    assert ExperimentConfig.from_dict(cfg.to_dict()) == cfg == preset("paper")
    with pytest.raises(ValueError, match="cluster.use_gpu: expected true/false"):
        preset("paper", ["cluster.use_gpu=maybe"])


def test_a_sweep_recorded_with_use_gpu_false_resumes_on_a_cpu_cluster():
    """Before the default was automatic, `sweep.json` recorded `false`; the same sweep rerun on a
    cluster without GPUs resolves to `false` and is the same sweep."""
    from abacus_ray.cluster.devices import resolve_trials

    old = trials(["cluster.use_gpu=false"])
    recorded = {"preset": "paper", "trials": [t.config.to_dict() for t in old]}
    now = resolve_trials(trials([]), nodes(*CPU_CLUSTER))
    assert (
        sweep_change(recorded, {"preset": "paper", "trials": [t.config.to_dict() for t in now]})
        is None
    )


def test_train_records_where_device_auto_put_the_run(tmp_path, capsys):
    """`abacus-ray train` (no Ray): an unset `cluster.use_gpu` becomes whether `--device` chose
    CUDA, so the checkpoint's config never holds the unset value."""
    import torch

    from abacus_ray.cli import main
    from abacus_ray.model.checkpoint import load_checkpoint

    small = ["model.hidden=32", "model.intermediate=64", "model.layers=1", "train.micro_batch=16",
             "train.global_batch=16", "train.max_steps=2", "cluster.use_gpu=auto"]
    argv = ["train", "--out", str(tmp_path / "run"), *(f"--set={s}" for s in small)]
    assert main(argv) == 0, capsys.readouterr().err
    assert load_checkpoint(on_disk(tmp_path / "run")).config.cluster.use_gpu is torch.cuda.is_available()
