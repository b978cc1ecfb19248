"""Reads under an address-space limit (`ulimit -v`, a batch scheduler's `RLIMIT_AS`): a whole-file
read used to ask for half the machine's free memory up front, so every real Parquet read ended in a
MemoryError under such a limit. Each command runs in a subprocess held to 4 GB of address space."""

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from abacus_ray.config import preset
from abacus_ray.model import ArithmeticTransformer
from abacus_ray.model.checkpoint import save_checkpoint
from abacus_ray.storage import memory_limit, on_disk

pytestmark = pytest.mark.cost(80)  # seconds in `make test`: its place in the order (conftest)

REPO = Path(__file__).resolve().parents[1]
LIMIT = 4 << 30


def _held(*args: str | Path, files: tuple[int, int] | None = None) -> subprocess.CompletedProcess:
    """`abacus-ray ARGS` under a 4 GB address space (and, given `files`, an open-files limit)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))
        if files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, files)

    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "abacus_ray.cli", *map(str, args)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300, preexec_fn=limit)


@pytest.mark.slow  # four CLI processes
def test_summary_dashboard_and_eval_into_existing_results_work_under_rlimit_as(tmp_path):
    cfg = preset("tiny", ["model.hidden=16", "model.intermediate=32", "model.heads=2",
                          "model.layers=1", "model.abacus_table=128"])
    torch.manual_seed(0)
    save_checkpoint(on_disk(tmp_path / "run"), ArithmeticTransformer.for_experiment(cfg), cfg,
                    {"step": 0})
    results = tmp_path / "results"
    for cells in ("1-3x1-3", "1-4x1-4"):  # the second reads the first's parts to skip their cells
        done = _held("eval", tmp_path / "run", "--out", results, "--cells", cells,
                     "--per-cell", "2", "--quiet")
        assert done.returncode == 0, done.stderr
    assert "evaluated 7 cells (9 already present)" in done.stdout
    for args in (("summary", results), ("dashboard", results, "--out", tmp_path / "site")):
        done = _held(*args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def test_the_read_bound_respects_the_address_space_limit():
    from psutil import Process

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    unlimited = memory_limit()
    cap = Process().memory_info().vms + (8 << 30)  # 8 GB above what this process holds now
    try:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        bound = memory_limit()
        room = cap - Process().memory_info().vms
        assert bound <= room // 2 and bound <= unlimited
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _sweep_with_a_trial(root: Path) -> Path:
    """A sweep root as a finished sweep leaves it: sweep.json, one trial's checkpoint and the trial
    record that lists it (no Ray needed to make it)."""
    import json

    from abacus_ray import storage, trial_status
    from abacus_ray.sweep_dir import SweepDir

    cfg = preset("tiny", ["model.hidden=16", "model.intermediate=32", "model.heads=2",
                          "model.layers=1", "model.abacus_table=128"])
    torch.manual_seed(0)
    step = root / "train" / "train-a" / "step-000000001"
    save_checkpoint(on_disk(step), ArithmeticTransformer.for_experiment(cfg), cfg, {"step": 1})
    (root / "sweep.json").write_text(json.dumps({"preset": "tiny", "trials": [cfg.to_dict()]}))
    storage.write_parquet(on_disk(root / SweepDir.TRIALS), trial_status.record_table(
        [{"run": "s/a", "status": trial_status.FINISHED,
          "checkpoint": "train/train-a/step-000000001"}]))
    return root


@pytest.mark.slow  # starts a Ray of its own in the subprocess
@pytest.mark.ray
def test_eval_all_works_under_rlimit_as_and_says_when_open_files_are_too_few(tmp_path):
    sweep = _sweep_with_a_trial(tmp_path / "s")
    argv = ("eval-all", sweep, "--grid", "tiny-addition", "--per-cell", "2", "--num-cpus", "1")
    # ulimit -n 64 (hard too): Ray's node used to die mid-evaluation; now one line, nothing started
    refused = _held(*argv, files=(64, 64))
    assert refused.returncode == 2 and refused.stderr.strip() == (
        "abacus-ray eval-all: error: ulimit -n: this process may open 64 files at most; Ray's "
        "processes need 1,024: raise the limit (ulimit -n 1024) and run again")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    done = _held(*argv, files=(64, hard))  # a soft limit alone is raised, as any process may
    assert done.returncode == 0, done.stderr
    assert "eval-all: 1 model(s), 152 cells evaluated, 0 already present" in done.stdout
