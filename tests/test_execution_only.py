"""Every field on `config.identity.EXECUTION_ONLY` changes how a trial runs, never the model: each is
held here (or, for `train.compile`, in tests/test_training_compile.py) by training the same small
model with the field changed and getting the same weights, or by the identity check comparing what
does reach the model (a worker's torch threads)."""

import pytest

from abacus_ray.config import preset
from abacus_ray.config.identity import EXECUTION_ONLY, sweep_change
from abacus_ray.training.loop import train

# A 1 x 2 loop on 3-digit addition: the progressive loss, noise and Abacus offsets all draw
SMALL = ["model.hidden=32", "model.intermediate=64", "model.heads=4", "model.layers=1",
         "model.recurrences=2", "model.abacus_table=16", "model.max_k=6", "task.train_max_len=3",
         "train.micro_batch=8", "train.max_steps=6", "train.budget_hours=1000"]
# field -> (one value, another): trained both ways in-process
IN_PROCESS = {
    "train.report_every_s": (1000, 1e-9),  # a report after every step
    "train.checkpoint_every_min": (1000, 1e-9),  # a checkpoint after every step
    "cluster.cpus_per_worker": (1.0, 0.5),
    "cluster.placement": ("PACK", "STRICT_SPREAD"),
    "cluster.resources": ("", "lab:1"),
    "cluster.wait_warn_s": (60.0, 1.0),
}
ELSEWHERE = {"train.compile": "tests/test_training_compile.py"}


def test_every_execution_only_field_is_held_by_a_test():
    assert set(IN_PROCESS) | set(ELSEWHERE) == set(EXECUTION_ONLY)


@pytest.mark.parametrize("field", sorted(IN_PROCESS))
def test_an_execution_only_field_trains_the_same_model(tmp_path, field):
    one, other = IN_PROCESS[field]
    a = train(preset("tiny", SMALL + [f"{field}={one}"]), checkpoint_dir=tmp_path / "a")
    b = train(preset("tiny", SMALL + [f"{field}={other}"]), checkpoint_dir=tmp_path / "b")
    assert a.losses == b.losses and a.model_id == b.model_id


def test_cpus_per_worker_counts_by_the_threads_it_gives_a_worker():
    """Ray gives a worker floor(CPUs), at least 1, torch threads, and the thread count changes how a
    CPU sums floats: 0.98 and 1.0 CPU resume one sweep, 1.0 and 2.0 do not."""

    def record(cpus: float) -> dict:
        cfg = preset("tiny", [f"cluster.cpus_per_worker={cpus}"])
        return {"preset": "tiny", "trials": [{**cfg.to_dict(), "name": "a"}]}

    assert sweep_change(record(1.0), record(0.98)) is None
    change = sweep_change(record(1.0), record(2.0))
    assert change == ("trial a: cluster.cpus_per_worker 1.0 -> 2.0 (1 -> 2 torch threads per "
                      "worker); to resume it, rerun with --set cluster.cpus_per_worker=1.0 (a "
                      "rerun may add trials, grids or steps, nothing else)")
