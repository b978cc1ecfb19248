"""`abacus-ray train`: checkpoints in --out, --resume, progress lines and one-line errors."""

import re

from abacus_ray.cli import main
from abacus_ray.cli.train import progress_text
from abacus_ray.model.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint
from abacus_ray.storage import on_disk

SMALL = ["--set", "model.hidden=32", "--set", "model.intermediate=64", "--set", "model.heads=4",
         "--set", "model.layers=1", "--set", "train.micro_batch=16", "--set", "train.global_batch=16"]


def test_train_resume_and_errors(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--set", "train.max_steps=3", *SMALL]) == 0
    captured = capsys.readouterr()
    first = latest_checkpoint(on_disk(out))
    assert first.name == "step-000000003"
    assert f"checkpoint: {first}" in captured.out
    assert f"model_id: {load_checkpoint(first).model_id}" in captured.out
    assert "step 3 |" in captured.err and "budget 100.0%" in captured.err  # not a TTY: one line per report

    # an existing run is never silently mixed with a new one
    assert main(["train", "--out", str(out), *SMALL]) == 2
    err = capsys.readouterr().err
    assert "error: --out:" in err and "pass --resume" in err

    # --resume uses the stored config (small model) plus overrides: a longer steps budget
    assert main(["train", "--out", str(out), "--resume", "--set", "train.max_steps=5"]) == 0
    assert latest_checkpoint(on_disk(out)).name == "step-000000005"
    resumed = load_checkpoint(on_disk(out))
    assert resumed.config.model.hidden == 32 and resumed.meta["step"] == 5

    assert main(["train", "--out", str(tmp_path / "empty"), "--resume"]) == 2
    assert "--resume: no checkpoint" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "x"), "--set", "train.lr=-1"]) == 2
    assert "train.lr: must be > 0" in capsys.readouterr().err


def test_a_diverging_run_stops_and_saves_nothing_of_its_spoiled_weights(tmp_path, capsys):
    out = tmp_path / "run"
    # lr 1e3 overflows the loss within a few steps; a checkpoint after every step until then
    assert main(["train", "--out", str(out), "--set", "train.max_steps=30", "--set", "train.lr=1e3",
                 "--set", "train.checkpoint_every_min=1e-9", *SMALL]) == 1
    captured = capsys.readouterr()
    found = re.search(r"^train: diverged at step (\d+) \(its loss or gradient norm was not finite\)",
                      captured.err, re.M)
    assert found and 1 < int(found.group(1)) < 30, captured.err[-2000:]
    assert "checkpoint:" not in captured.out and "weights_only" not in captured.err
    # whichever goes first on this kernel set, the loss or the gradients, every checkpoint kept loads
    # (finite weights, matching hash) and the one named last is the step before
    steps = [load_checkpoint(c).meta["step"] for c in list_checkpoints(on_disk(out))]
    assert steps and steps[-1] == int(found.group(1)) - 1, steps
    last = latest_checkpoint(on_disk(out))
    assert f"the last checkpoint is {last}; lower train.lr" in captured.err


def test_progress_text():
    line = progress_text({"step": 1200, "samples": 76800, "samples_per_s": 1500.4, "loss": 0.01234, "lr": 1e-3,
                          "batch_size": 64, "budget_fraction": 0.4, "device_hours": 0.0123, "eta_s": 95.0})
    assert line.startswith("step 1,200 | 76,800 samples | 1,500 samples/s | loss 0.0123")
    assert "budget 40.0% (0.0123 device-h)" in line and line.endswith("ETA 1m35s")
    assert "MFU 41.0%" in progress_text({**{"step": 1, "samples": 1, "samples_per_s": 1.0, "loss": 1.0, "lr": 0.0,
                                             "batch_size": 1, "budget_fraction": 0.0, "device_hours": 0.0,
                                             "eta_s": None}, "mfu": 0.41})
