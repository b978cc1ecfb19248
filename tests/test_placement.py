"""Placement: impossible requests fail at once with one line, waits are told, several trials share a GPU.

The arithmetic of `abacus_ray.cluster.placement` is checked on hand-made node lists (the cases of
1-CPU nodes, a GPU trial without a GPU node, more workers than CPUs); the CLI's fail-fast
path, the pending-resources message and fractional GPUs run on a real embedded Ray.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from abacus_ray import storage
from abacus_ray.cli import error_text
from abacus_ray.config import preset
from abacus_ray.sweep import Sweep

ROOT = Path(__file__).resolve().parents[1]


def nodes(*resources: dict[str, float]):
    from abacus_ray.cluster.placement import Node

    return [Node(f"n{i}", r) for i, r in enumerate(resources)]


def cfg(**cluster):
    return preset("tiny", {f"cluster.{k}": v for k, v in cluster.items()})


def test_drivers_slices_never_starve_workers_on_one_cpu_nodes():
    from abacus_ray.cluster.placement import max_concurrency

    two_small = nodes({"CPU": 1}, {"CPU": 1})
    assert max_concurrency([cfg(), cfg()], two_small) == 1  # 2 would hang: each driver dents one node
    assert max_concurrency([cfg(), cfg()], nodes({"CPU": 2}, {"CPU": 2})) == 2
    assert max_concurrency([cfg(trainer="function")] * 2, two_small) == 2  # the trial is its worker
    assert max_concurrency([cfg(workers=2, placement="STRICT_SPREAD")] * 3, nodes({"CPU": 2}, {"CPU": 2})) == 1
    assert max_concurrency([cfg(workers=2, placement="STRICT_PACK")], nodes({"CPU": 3}, {"CPU": 1})) == 1


def test_mixed_shapes_are_not_capped_by_the_scarcest_one():
    """Trials of several resource shapes: the scarcest shape (one `l4` slot) must not hold the others back."""
    from abacus_ray.cluster.placement import max_concurrency

    cluster = nodes({"CPU": 2, "h100": 2}, {"CPU": 2, "h100": 2}, {"CPU": 2, "l4": 1}, {"CPU": 2, "cpu_pool": 2})
    mix = [cfg(resources="h100:1")] * 8 + [cfg(resources="l4:1")] * 2 + [cfg(resources="cpu_pool:1")] * 4
    assert max_concurrency([c.replace(cluster=dataclasses.replace(c.cluster, trainer="function")) for c in mix],
                           cluster) == 14  # all queued at once: Ray starts each as soon as a node fits it
    # TorchTrainer trials: as many as the shapes' slots hold beside their drivers (2 + 1 + 1; it was 1)
    assert max_concurrency(mix, cluster) == 4
    tight = nodes({"CPU": 1.015, "l4": 1}, {"CPU": 2, "h100": 2})  # 2 drivers' slices leave no l4 worker a CPU
    assert max_concurrency([cfg(resources="l4:1"), cfg(resources="h100:1")], tight) == 1


@pytest.mark.parametrize("config, cluster, culprit", [
    (dict(), [{"CPU": 1}], "{CPU: 1}"),  # 1 worker x 1 CPU + the driver's slice on one 1-CPU node
    (dict(use_gpu=True), [{"CPU": 8}, {"CPU": 2}], "{CPU: 8, GPU: 0}"),  # a GPU trial, no GPU node
    (dict(workers=3), [{"CPU": 2}], "{CPU: 2}"),  # more workers than CPUs
    (dict(workers=2, placement="STRICT_SPREAD"), [{"CPU": 4}], "{CPU: 4}"),  # 2 nodes needed, 1 there
    (dict(resources="a4000:1"), [{"CPU": 4}], "a4000: 0"),  # a custom resource no node has
])
def test_impossible_trials_are_refused_naming_the_request_and_the_largest_node(config, cluster, culprit):
    from abacus_ray.cluster.placement import PlacementError, max_concurrency

    with pytest.raises(PlacementError) as e:
        max_concurrency([cfg(), cfg(**config)], nodes(*cluster))
    line = str(e.value)
    assert "\n" not in line and "can never start" in line and f"trial {cfg().name} " in line
    assert culprit in line.split("offers", 1)[1]  # what the largest node has of each requested resource


def test_eval_pools_count_whole_cpus_and_gpus_node_by_node():
    from abacus_ray.cluster.placement import PlacementError, eval_pools

    assert eval_pools(100, None, None, nodes({"CPU": 1}, {"CPU": 2, "GPU": 1}, {"CPU": 2})) == (1, 4)
    assert eval_pools(3, None, None, nodes({"CPU": 0.5}, {"CPU": 1.5})) == (0, 1)  # actors need whole CPUs
    with pytest.raises(PlacementError, match="offers {CPU: 0.5, GPU: 0}"):
        eval_pools(3, None, None, nodes({"CPU": 0.5}))
    with pytest.raises(PlacementError, match="1 GPU actor"):
        eval_pools(3, None, 1, nodes({"CPU": 4}))


def _items(preset_name: str, overrides: list[str], grid: str, per_cell: int = 100) -> list[dict]:
    """Work items as the planner makes them (evaluation.work), for a model of this preset on this grid."""
    from abacus_ray.evaluation import work
    from abacus_ray.evaluation.grids import resolve_grid_names

    c = preset(preset_name, overrides)
    cells = sorted(work.cells_for(c, resolve_grid_names([grid])), key=lambda cell: work.cell_cost(cell, per_cell))
    flops = work.token_flops(c, c.model.test_recurrences)
    return [{"i": [x.i for x in u], "flops": work.forward_flops(u, per_cell, flops)}
            for u in work.work_units(cells, per_cell, work.ITEM_TOKENS, work.ITEM_CELLS)]


def test_grid_evaluation_gives_cpu_actors_only_what_they_finish_well_before_the_gpus():
    from abacus_ray.cluster.grid_eval import split_by_speed

    # The paper's 8 x 2 on the whole grid, one H100 machine (1 GPU actor, 15 CPU actors): a CPU core
    # is ~3,000x slower on this model, so every item goes to the GPU (a fixed ratio sent 43 % to CPUs).
    paper = _items("paper", ["model.layers=8", "model.recurrences=2"], "paper-addition")
    gpu, cpu = split_by_speed(paper, 1, 15)
    assert len(gpu) == len(paper) and cpu == []
    # The tiny model: CPU actors are worth using, and take a share that ends in half the GPU pool's time.
    tiny = _items("tiny", [], "paper-addition")
    gpu, cpu = split_by_speed(tiny, 1, 15)
    assert 0 < len(cpu) < len(gpu) and len(gpu) + len(cpu) == len(tiny)
    assert sorted(map(id, gpu + cpu)) == sorted(map(id, tiny))  # each item exactly once
    assert split_by_speed(tiny, 0, 4) == ([], tiny) and split_by_speed(tiny, 2, 0) == (tiny, [])


def test_bad_placement_settings_are_one_line_config_errors():
    for key, value, culprit in [("placement", "DIAGONAL", "cluster.placement"), ("resources", "a4000", "cluster.resources"),
                                ("resources", "GPU:1", "cluster.resources"), ("wait_warn_s", "0", "cluster.wait_warn_s")]:
        with pytest.raises(ValueError, match=culprit):
            cfg(**{key: value})
    assert cfg(resources="a4000:0.5, big:2").cluster.custom_resources == {"a4000": 0.5, "big": 2.0}


@pytest.mark.ray
def test_sweep_that_can_never_fit_stops_at_once_with_one_line(tmp_path):
    """A GPU trial on a Ray without GPUs: exit 2 within a minute, one line, nothing trained."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "sweeps/fig10_k.py", "--max-trials", "1", "--num-cpus", "1",
                          "--set", "cluster.use_gpu=true", "--storage", str(tmp_path)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr[-2000:]
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "GPU: 1" in errors[0] and "offers {CPU: 1, GPU: 0}" in errors[0], out.stderr[-2000:]
    assert not (tmp_path / "fig10_k" / "tune").exists()


@pytest.mark.ray
def test_a_placement_group_waiting_too_long_is_told_with_what_is_free(ray_local):
    from ray.util.placement_group import placement_group, remove_placement_group

    from abacus_ray.cluster.placement import PendingWatch

    pg = placement_group([{"CPU": 3}], strategy="PACK")  # the embedded Ray has 2
    try:
        watch = PendingWatch(after_s=0.0)
        lines = watch.check() or watch.check()
        assert len(lines) == 1 and "{CPU: 3}" in lines[0] and "largest free node offers {CPU: 2}" in lines[0], lines
        assert watch.check() == []  # told once
    finally:
        remove_placement_group(pg)


def test_an_os_error_without_a_path_names_the_call_and_the_lost_working_directory(tmp_path):
    gone = tmp_path / "job-working-dir"
    gone.mkdir()
    cwd = os.getcwd()
    os.chdir(gone)
    gone.rmdir()
    try:
        os.getcwd()
    except OSError as e:
        text = error_text(e)
    finally:
        os.chdir(cwd)
    assert text.startswith("No such file or directory; the working directory") and "no longer exists" in text
    assert "raised by" not in text and "no path given" not in text


@pytest.mark.ray
@pytest.mark.cost(80)  # the module's three Ray tests
def test_four_trials_share_one_gpu_slot_at_a_quarter_each(ray_local, tmp_path):
    """`cluster.gpus_per_worker=0.25`: four trials run at once on the embedded Ray's one (fake) GPU."""
    from abacus_ray.cluster.driver import run_sweep
    from abacus_ray.cluster.placement import max_concurrency

    sweep = Sweep(name="quarter", caption="", base={"cluster.use_gpu": True, "cluster.gpus_per_worker": 0.25,
                                                     "cluster.cpus_per_worker": 0.45, "train.max_steps": 150,
                                                     "train.budget_hours": 1000.0, "cluster.trainer": "function"},
                  seeds=4)
    trials = sweep.expand("tiny")
    assert max_concurrency([t.config for t in trials]) == 4
    finished = run_sweep("quarter", "tiny", trials, storage_root=storage.resolve(tmp_path), grids={},
                         evaluate=False).finished
    assert len(finished) == 4
    spans = []
    for result in sorted((tmp_path / "quarter" / "tune").glob("*/result.json")):
        lines = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        spans.append((lines[0]["timestamp"] - lines[0]["time_this_iter_s"], lines[-1]["timestamp"]))
    assert len(spans) == 4
    assert max(start for start, _ in spans) < min(end for _, end in spans), spans  # all four at once
