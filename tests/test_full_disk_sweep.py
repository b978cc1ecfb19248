"""A disk that fills in the middle of a sweep: one line per trial and one for the sweep, exit 2.

Before, the same run ended in about 630 lines (Tune's syncer warning every 10 s, each trial's
traceback per retry, SQLite's from MLflow) and exit 1. The sweep's storage is a real small file
system (tmpfs), filled by the test the moment the first checkpoint lands in it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pace import deadline
from test_bad_input_places import _tmpfs, fill_up

pytestmark = [pytest.mark.slow, pytest.mark.ray]

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def disk(tmp_path):
    """Room for the sweep's start (the free-space check before Ray passes), filled later."""
    yield from _tmpfs(tmp_path / "disk", "400m")


def _fill_when_a_checkpoint_lands(mount: Path, store: Path, done: threading.Event) -> None:
    while not done.is_set() and not list(store.rglob("step-*/meta.json")):
        done.wait(0.2)
    fill_up(mount)


@pytest.mark.scenario
@pytest.mark.cost(75)
def test_a_disk_that_fills_mid_sweep_ends_it_in_one_line_per_trial(disk):
    store = disk / "store"
    done = threading.Event()
    filler = threading.Thread(target=_fill_when_a_checkpoint_lands, args=(disk, store, done))
    filler.start()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "abacus_ray.cli", "sweep", "fig10_k", "--preset", "tiny",
             "--storage", str(store), "--set", "train.max_steps=400",
             "--set", "train.checkpoint_every_min=0.02"],
            cwd=REPO, capture_output=True, text=True, timeout=deadline(300))
    finally:
        done.set()
        filler.join()
    assert (disk / ".filler").exists(), "no checkpoint landed before the sweep ended"
    err = proc.stderr
    assert proc.returncode == 2 and "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if "disk full" in line or "error:" in line]
    assert len(lines) == 3, err[-3000:]
    for run in ("fig10_k/max_k=1", "fig10_k/max_k=12"):
        assert any(line.startswith(f"{run}: stopped, disk full: ") and "No space left" in line
                   for line in lines), lines
    assert lines[-1].startswith(f"abacus-ray sweep: error: {store}/fig10_k: No space left on "
                                "device (2 trial(s) stopped by it)"), lines[-1]
    steps = sorted(store.rglob("step-*"))
    assert steps  # the checkpoints written before the disk filled are kept, each whole
    for step in steps:
        assert sorted(p.name for p in step.iterdir()) == [
            "config.json", "meta.json", "model.pt", "train_state.pt"], step


def test_a_trial_error_cut_short_by_a_full_disk_is_read_as_the_full_disk(disk, ray_local):
    """Tune writes a failed trial's error into the full disk as an empty `error.pkl` and then fails
    reading it back (`EOFError` out of `Tuner.fit`: a traceback where the sweep above owes one line
    per trial); the driver reads the grid without it."""
    import test_bad_input_places
    from ray import cloudpickle, tune

    from abacus_ray import storage
    from abacus_ray.cluster.driver import _fit
    from abacus_ray.sweep_dir import SweepDir

    def fill_then_fail(config: dict) -> None:  # nested: Ray's workers get it (and fill_up) by value
        fill_up(Path(config["disk"]))
        raise RuntimeError("the disk is full")

    dirs = SweepDir(storage.resolve(str(disk / "store")), "fill")
    exp = dirs.tune_run(0)
    cloudpickle.register_pickle_by_value(test_bad_input_places)  # the workers cannot import tests/
    try:
        tuner = tune.Tuner(fill_then_fail, param_space={"disk": str(disk)},
                           run_config=tune.RunConfig(name=exp.name, storage_path=dirs.root.path,
                                                     verbose=0))
        (result,) = _fit(tuner, dirs, exp)
    finally:
        cloudpickle.unregister_pickle_by_value(test_bad_input_places)
    assert result.error is not None
    # the empty copy Tune could not read went; where the full disk still took the whole file (a few
    # bytes freed as the trial ended), Tune read it and it stays
    assert all(storage.file_info(pkl).size > 0 for pkl in storage.find(exp, "error.pkl"))
