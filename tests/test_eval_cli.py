"""`abacus-ray eval` / `summary`: a run killed with SIGKILL resumes with only the missing cells."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from abacus_ray.cli import main
from abacus_ray.config import preset
from abacus_ray.evaluation.results import KEY, part_files, read_cells, read_samples
from abacus_ray.model import ArithmeticTransformer
from abacus_ray.model.checkpoint import save_checkpoint
from abacus_ray.storage import on_disk

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    cfg = preset("tiny", ["model.hidden=16", "model.intermediate=32", "model.heads=2", "model.layers=1",
                          "model.abacus_table=128", "eval.per_cell=3"])
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ckpt") / "run"
    save_checkpoint(on_disk(path), ArithmeticTransformer.for_experiment(cfg), cfg, {"step": 0})
    return path


def cli(*args) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "abacus_ray.cli", *map(str, args)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_killed_eval_resumes_with_only_the_missing_cells(checkpoint, tmp_path):
    out = tmp_path / "results"
    args = ("eval", checkpoint, "--out", out, "--cells", "1-20x1-20", "--per-cell", "2", "--engine", "naive",
            "--flush-every-cells", "5", "--token-budget", "64")
    proc = cli(*args)
    deadline = time.monotonic() + 120
    while len(part_files(on_disk(out))) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    before = read_cells(on_disk(out))
    assert 15 <= len(before) < 400
    assert not before.duplicated(list(KEY)).any()

    rerun = cli(*args[:-6], "--engine", "teacher", "--quiet")  # the engine is not part of the key
    stdout, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr
    assert f"evaluated {400 - len(before)} cells ({len(before)} already present)" in stdout
    after = read_cells(on_disk(out))
    assert len(after) == 400 and not after.duplicated(list(KEY)).any()
    assert set(zip(after.i, after.j, strict=True)) == {(i, j) for i in range(1, 21) for j in range(1, 21)}
    # rows from before the kill are untouched
    merged = before.merge(after, on=list(KEY), suffixes=("", "_after"))
    assert len(merged) == len(before) and (merged["n_correct"] == merged["n_correct_after"]).all()


def test_eval_defaults_samples_and_summary(checkpoint, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["eval", str(checkpoint), "--out", str(out), "--diagonal", "1-3,7", "--samples", "--quiet"]) == 0
    df = read_cells(on_disk(out))
    assert sorted(zip(df.i, df.j, strict=True)) == [(1, 1), (2, 2), (3, 3), (7, 7)]
    assert set(df["per_cell"]) == {3}  # from the checkpoint's eval.per_cell
    assert set(df["region"]) == {"id", "ood"}
    assert len(read_samples(on_disk(out))) == 12
    assert main(["eval", str(checkpoint), "--out", str(out), "--diagonal", "1-3", "--quiet"]) == 0
    assert "evaluated 0 cells (3 already present)" in capsys.readouterr().out
    assert main(["summary", str(out)]) == 0
    text = capsys.readouterr().out
    header = text.splitlines()[0].split()
    assert header[:3] == ["model_id", "name", "model.positions"] and "ood" in header and "cells" in header
    assert read_cells(on_disk(out))["model_id"].iloc[0][:12] in text


@pytest.mark.parametrize("argv, message", [
    (["summary", "{tmp}"], "{tmp}: holds no abacus-ray results"),
    (["summary", "{tmp}/missing"], "{tmp}/missing: no such results directory"),
    (["eval", "{ckpt}", "--out", "{tmp}", "--cells", "1-3x"], "--cells: "),
    (["eval", "{ckpt}", "--out", "{tmp}", "--diagonal", "9-2"], "--diagonal: range '9-2' is empty"),
    (["eval", "{ckpt}", "--out", "{tmp}", "--grid", "paper-sorting"], "grid: 'paper-sorting' holds 'sort'"),
    (["eval", "{ckpt}", "--out", "{tmp}", "--grid", "nope"], "--grid: unknown grid 'nope'"),
    (["eval", "{ckpt}", "--out", "{tmp}", "--per-cell", "0", "--cells", "1x1"], "eval.per_cell: must be >= 1"),
    (["eval", "{tmp}/none", "--out", "{tmp}"], "{tmp}/none: no such checkpoint directory"),
    (["eval", "{ckpt}", "--out", "{tmp}", "--diagonal", "200"], "model.abacus_table: cell add 200x200"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, checkpoint, tmp_path, capsys):
    argv = [a.format(tmp=tmp_path, ckpt=checkpoint) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message.format(tmp=tmp_path) in err
