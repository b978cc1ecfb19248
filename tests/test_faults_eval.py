"""Fault 3: SIGKILL grid evaluation at random points, rerun to exactly every cell once.

Each test then reruns or waits for recovery and checks that nothing was lost, nothing was done twice,
and no reader ever saw a half-written file (the tools: `tests/faults.py`).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from faults import finish, kill_driver, one_thread, start, subprocess_env, wait_for

from abacus_ray import storage
from abacus_ray.config import preset
from abacus_ray.storage import on_disk

pytestmark = [pytest.mark.slow, pytest.mark.scenario, pytest.mark.cost(265)]


EVAL_SEEDS = (0, 1, 2)  # one killed run per seed, chained on one results directory, then a full rerun
EVAL_PER_CELL = 4


@dataclass(frozen=True)
class EvalPath:
    """One way to run grid evaluation, and where its random kill points fall."""

    grid: str  # grid spec (`resolve_grid_names`)
    parts_before_kill: tuple[int, int]  # wait for a random number of new result parts in this range...
    max_delay_s: float  # ...then a random delay up to this, then SIGKILL

    def command(self, name: str, models: Path, out: Path) -> list[str]:
        if name == "cli":  # flushing every 2 cells: ~100 parts per full run
            runs = [str(r) for r in sorted(models.iterdir())]
            return [str(Path(sys.executable).with_name("abacus-ray")), "eval", *runs, "--out", str(out), "--cells",
                    self.grid.removeprefix("cells:"), "--per-cell", str(EVAL_PER_CELL), "--flush-every-cells", "2",
                    "--device", "cpu", "--quiet"]
        # Ray Data: one part per work item of <= 64 cells: ~14 parts per full run
        return [str(Path(sys.executable).with_name("abacus-ray")), "eval-all", str(models), "--grid", self.grid,
                "--per-cell", str(EVAL_PER_CELL), "--out", str(out), "--num-cpus", "2"]


EVAL_PATHS = {"cli": EvalPath("cells:1-10x1-10", (1, 8), 0.5), "ray": EvalPath("cells:1-20x1-20", (1, 2), 1.0)}


@pytest.fixture(scope="module")
def eval_models(tmp_path_factory) -> Path:
    """Two tiny models (5 steps, seeds 0 and 1), each a run directory under the returned root."""
    from abacus_ray.training.loop import train

    root = tmp_path_factory.mktemp("eval-fault-models")
    with one_thread():
        for seed in (0, 1):
            cfg = preset("tiny", {"train.max_steps": 5, "train.budget_hours": 1000.0, "seed": seed})
            train(cfg, checkpoint_dir=root / f"seed{seed}")
    return root


class ResultsReader(threading.Thread):
    """Reads a results directory over and over while it is written, as a dashboard or `summary` would.

    Two readers: ours (`read_cells`, `part-*.parquet` only) and plain pandas on the directory (pyarrow
    skips dot-files such as a writer's `.tmp-part-*`). Every read must succeed and hold no key twice.
    """

    def __init__(self, out: Path):
        super().__init__(daemon=True)
        self.out = out
        self.reads = 0
        self.errors: list[str] = []
        self.stop = threading.Event()

    def check(self) -> None:
        from abacus_ray.evaluation.results import KEY, part_files, read_cells

        if not part_files(on_disk(self.out)):
            return
        try:
            ours = read_cells(on_disk(self.out), list(KEY) + ["schema_version"])
            plain = storage.read_parquet(on_disk(self.out), columns=list(KEY)).to_pandas()  # the directory as one dataset
        except Exception as e:  # noqa: BLE001 - any failure to read is what this reader reports
            self.errors.append(f"{type(e).__name__}: {e}")
            return
        self.reads += 1
        for name, df in (("read_cells", ours), ("a plain dataset read", plain)):
            if df.duplicated(list(KEY)).any():
                self.errors.append(f"{name} saw a key twice")

    def run(self) -> None:
        while not self.stop.is_set():
            self.check()
            time.sleep(0.1)


def kill_at_random_point(cmd: list[str], out: Path, seed: int, path: EvalPath, log: Path) -> dict[str, Any]:
    """Run `cmd`, SIGKILL it at a random point drawn from `seed`, and check what a reader sees there."""
    import random

    from abacus_ray.evaluation.results import part_files

    rng = random.Random(seed)
    n_wait, delay = rng.randint(*path.parts_before_kill), rng.uniform(0, path.max_delay_s)
    before = len(part_files(on_disk(out)))
    reader = ResultsReader(out)
    proc = start(cmd, log, subprocess_env())
    reader.start()
    t0 = time.monotonic()
    wait_for(lambda: proc.poll() is not None or len(part_files(on_disk(out))) >= before + n_wait, 300,
             f"{n_wait} new result parts")
    time.sleep(delay)  # the random kill point itself; the synchronisation is the poll above
    finished_first = proc.poll() is not None
    _, left_core, _ = kill_driver(proc)
    assert not left_core, f"Ray processes outlived the killed evaluation: {left_core}"
    reader.stop.set()
    reader.join()
    reader.check()  # at the kill point: the directory reads cleanly, whatever the kill interrupted
    assert not reader.errors, reader.errors[:3]
    for part in part_files(on_disk(out)):
        storage.read_parquet(part)  # every part is a whole Parquet file
    others = sorted(p.name for p in out.glob("*") if not p.name.startswith("part-")) if out.exists() else []
    assert all(name.startswith(".tmp-") for name in others), others  # a write cut short stays a hidden temp file
    return {"seed": seed, "after_parts": n_wait, "delay_s": round(delay, 2), "at_s": round(time.monotonic() - t0, 1),
            "new_parts": len(part_files(on_disk(out))) - before, "tmp_left": len(others), "reads": reader.reads,
            "finished_first": finished_first}


@pytest.mark.parametrize("name", ["cli", pytest.param("ray", marks=pytest.mark.ray)])
def test_killed_grid_evaluation_reruns_to_exactly_every_cell(name, eval_models, tmp_path):
    from abacus_ray.evaluation.grids import resolve_grid_names
    from abacus_ray.evaluation.results import KEY, read_cells
    from abacus_ray.model.checkpoint import latest_checkpoint

    path, out = EVAL_PATHS[name], tmp_path / "results"
    cmd = path.command(name, eval_models, out)
    kills = [kill_at_random_point(cmd, out, seed, path, tmp_path / f"killed-{seed}.log") for seed in EVAL_SEEDS]
    assert sum(not k["finished_first"] for k in kills) >= 2, f"most kills came after the run had finished: {kills}"

    t0 = time.monotonic()
    log = tmp_path / "rerun.log"
    finish(start(cmd, log, subprocess_env()), log, timeout=300)
    t_rerun = time.monotonic() - t0
    df = read_cells(on_disk(out))
    models = sorted(json.loads(storage.read_text(latest_checkpoint(on_disk(r)) / "meta.json"))["model_id"]
                    for r in eval_models.iterdir())
    cells = {(c.i, c.j) for c in resolve_grid_names((path.grid,))[0].cells("add")}
    missing = {(m, i, j) for m in models for i, j in cells} - set(zip(df["model_id"], df["i"], df["j"], strict=True))
    duplicates = int(df.duplicated(list(KEY)).sum())
    assert not missing and duplicates == 0, (len(missing), duplicates)
    assert sorted(df["model_id"].unique()) == models and len(df) == len(models) * len(cells)
    assert set(df["per_cell"]) == {EVAL_PER_CELL}
    print(f"\neval fault ({name}): {len(kills)} kills {kills}; rerun {t_rerun:.1f}s; "
          f"{len(df)} cells, 0 missing, 0 duplicates")
