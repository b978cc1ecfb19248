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

REPO = Path(__file__).resolve().parents[1]
LIMIT = 4 << 30


def _held(*args: str | Path) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

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
