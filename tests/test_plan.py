"""`abacus-ray plan`: the cost of sweeps before they run (abacus_ray/plan.py, abacus_ray/cli/plan.py).

Checked against what the repository measured or computes elsewhere: the budget's own samples
(`training/budget.budget_terms`), the 20-minute H100 run of the paper 8 x 2 (docs/results.md §5), the
evaluation-time benchmark on the same H100, a real checkpoint's bytes, and `sweep --dry-run`'s trials.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from abacus_ray.cli import main
from abacus_ray.config import preset
from abacus_ray.plan import CHECKPOINT_BYTES_PER_PARAM, DEVICES, trial_cost
from abacus_ray.storage import on_disk
from abacus_ray.sweep import Sweep
from abacus_ray.training.budget import budget_terms

PAPER_8X2 = ["model.layers=8", "model.recurrences=2"]


def run_plan(capsys, *argv: str) -> dict:
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_paper_trial_costs_its_budget_and_the_measured_h100_run_within_5_percent():
    cfg = preset("paper", PAPER_8X2)
    cost = trial_cost(cfg)
    assert cost.samples == budget_terms(cfg)["samples"] == 70_015_762
    assert cost.a4000_hours == pytest.approx(24.0, rel=1e-6)  # the A4000 prices the budget: 24 of its hours
    # The measured run: 10,051,584 samples in 0.3338 device-hours (20.0 min) on one H100 (docs/results/gpu/train.log).
    per_sample = cost.train_flops / cost.samples
    h100 = DEVICES["H100"]
    predicted_min = 10_051_584 * per_sample / (h100.peak_tflops * 1e12 * h100.mfu) / 60
    assert predicted_min == pytest.approx(0.3338 * 60, rel=0.05), predicted_min
    # The whole paper-addition grid on the same H100: measured 5.3 min (benchmark) and 5.1 (the run's cells).
    grid = trial_cost(preset("paper", [*PAPER_8X2, "eval.grids=paper-addition"]))
    assert grid.eval_cells == 10_060 and grid.eval_tokens == 174_538_000  # eval_time.txt's token count
    assert 5.0 <= grid.eval_hours(h100) * 60 <= 5.4


def test_checkpoint_bytes_match_a_real_checkpoint(tmp_path):
    from abacus_ray.model.checkpoint import save_checkpoint
    from abacus_ray.model.transformer import ArithmeticTransformer
    from abacus_ray.training.optimizer import build_optimizer

    cfg = preset("tiny", ["model.hidden=256", "model.intermediate=512"])
    model = ArithmeticTransformer.for_experiment(cfg)
    opt = build_optimizer(model, cfg.train)
    model(torch.randint(0, 10, (2, 8))).sum().backward()
    opt.step()
    save_checkpoint(on_disk(tmp_path / "ckpt"), model, cfg, {"optimizer": opt.state_dict(), "step": 1})
    written = sum(p.stat().st_size for p in (tmp_path / "ckpt").rglob("*") if p.is_file())
    assert written / model.num_params() == pytest.approx(CHECKPOINT_BYTES_PER_PARAM, rel=0.05)


@pytest.mark.slow  # ~10 s: four paper plans and a dry run
def test_plan_counts_the_sweeps_trials_and_scales_with_seeds_mfu_and_price(capsys):
    assert main(["sweep", "fig10_k", "--preset", "paper", "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)
    one = run_plan(capsys, "fig10_k")
    assert one["total"]["trials"] == len(dry["trials"]) == 20
    assert one["total"]["a4000_hours"] == pytest.approx(sum(t["budget"]["a4000_hours"] for t in dry["trials"]))
    more = run_plan(capsys, "fig10_k", "--seeds", "7", "--mfu", "H100=0.478", "--price", "H100=2.5", "--gpu", "H100")
    assert more["total"]["trials"] == 4 * 7
    h1, h2 = one["total"]["gpus"]["H100"], more["total"]["gpus"]["H100"]
    assert h2["train_hours"] == pytest.approx(h1["train_hours"] * 7 / 20 * 4 / 2)  # 7 of 5 seeds, twice the MFU
    assert h2["usd"] == pytest.approx(2.5 * (h2["train_hours"] + h2["eval_minutes"] / 60))
    assert list(more["assumptions"]) == ["H100"] and more["assumptions"]["H100"]["mfu_basis"] == "--mfu"
    capsys.readouterr()
    assert main(["plan", "fig10_k", "fig4_depth_recurrence", "--set", "train.budget_a4000_hours=12"]) == 0
    out = capsys.readouterr().out.splitlines()
    total = [line for line in out if line.startswith("total: ")]
    assert len(total) == 1 and "35 trials, 420 A4000-hours" in total[0], total
    assert any(line.startswith("TOTAL") for line in out)


@pytest.mark.parametrize(("argv", "culprit"), [
    (["fig10_k", "--seeds", "1000000000"], "--seeds: must be in 1..1000"),
    (["fig10_k", "--gpu", "V99"], "--gpu: unknown GPU 'V99'"),
    (["fig10_k", "--mfu", "H100=2"], "--mfu: 'H100=2' must lie in"),
    (["fig10_k", "--price", "3"], "--price: give GPU=USD_PER_HOUR"),
    (["fig10_k", "--all"], "NAME: give one or more sweeps or --all"),
    (["no_such_sweep"], "no sweep named 'no_such_sweep'"),
])
def test_bad_input_is_one_line_exit_2_before_work(argv, culprit, capsys):
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr()
    lines = err.err.strip().splitlines()
    assert err.out == "" and len(lines) == 1 and culprit in lines[0], err


@pytest.mark.slow  # over a second: out of the fast tier
def test_huge_seeds_are_refused_before_any_expansion(capsys, monkeypatch):
    out = subprocess.run([sys.executable, "-m", "abacus_ray.cli", "plan", "--all", "--seeds", str(10**12)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1, out
    assert "--seeds: must be in 1..1000, got 1000000000000" in out.stderr

    def expanded(*args, **kwargs):
        raise AssertionError("a sweep was expanded before --seeds was checked")

    monkeypatch.setattr(Sweep, "expand", expanded)
    assert main(["plan", "--all", "--seeds", str(10**12)]) == 2
    assert "--seeds: must be in 1..1000" in capsys.readouterr().err


def test_no_figures_to_plan_is_an_error_not_a_free_reproduction(capsys, monkeypatch):
    """An installation whose figures are missing must not print "total: 0 trials" and succeed."""
    from abacus_ray import figures

    monkeypatch.setattr(figures, "names", lambda: ())
    assert main(["plan", "--all"]) == 2
    err = capsys.readouterr()
    assert err.out == "" and err.err.strip().splitlines() == [
        "abacus-ray plan: error: --all: no figures found in abacus_ray.figures (a broken installation?); nothing to plan"]


def test_a_cpu_scale_plan_prices_core_hours_that_scale_with_steps_models_seeds_and_cores(capsys):
    """`plan --preset tiny`: core-hours of training (the sweep's FLOPs over one core's measured
    rate at the model's width) and evaluation, and wall-hours on `--cores`; no timing asserted."""
    from abacus_ray.plan import CPU_SHARED_STRETCH, CPU_SWEEP_START_S, CPU_TRIAL_START_S
    from abacus_ray.training import cpu_rates

    assert main(["plan", "fig10_k", "--preset", "tiny"]) == 0
    total = [line for line in capsys.readouterr().out.splitlines() if line.startswith("total: ")]
    assert len(total) == 1 and " core-hours (" in total[0] and " wall-hours on " in total[0], total
    base = run_plan(capsys, "fig10_k", "--preset", "tiny", "--cores", "1")
    cpu = base["total"]["cpu"]
    assert cpu["train_core_hours"] > 0 and cpu["eval_core_hours"] > 0
    assert cpu["train_core_hours"] == pytest.approx(
        base["sweeps"][0]["train_flops"] / cpu_rates.train_rate(128) / 3600)
    starts = (base["total"]["trials"] * CPU_TRIAL_START_S + CPU_SWEEP_START_S) / 3600
    assert cpu["wall_hours"] == pytest.approx(cpu["core_hours"] + starts)  # one after another
    steps = base["sweeps"][0]["samples"] // base["total"]["trials"] // 64  # batch 64, no ramp
    longer = run_plan(capsys, "fig10_k", "--preset", "tiny", "--cores", "1", "--set",
                      f"train.max_steps={2 * steps}")["total"]["cpu"]
    assert longer["train_core_hours"] == pytest.approx(2 * cpu["train_core_hours"])
    assert longer["eval_core_hours"] == pytest.approx(cpu["eval_core_hours"])
    seeds = run_plan(capsys, "fig10_k", "--preset", "tiny", "--cores", "1", "--seeds", "6")
    assert seeds["total"]["cpu"]["core_hours"] == pytest.approx(
        cpu["core_hours"] * seeds["total"]["trials"] / base["total"]["trials"])
    wide = run_plan(capsys, "fig10_k", "--preset", "tiny", "--cores", "1",
                    "--set", "model.hidden=256", "--set", "model.intermediate=1024")
    flops = wide["sweeps"][0]["train_flops"] / base["sweeps"][0]["train_flops"]
    assert flops > 2  # a wider model: more FLOPs, priced at its own width's rate
    assert wide["total"]["cpu"]["train_core_hours"] == pytest.approx(
        cpu["train_core_hours"] * flops * cpu_rates.train_rate(128) / cpu_rates.train_rate(256))
    two = run_plan(capsys, "fig10_k", "--preset", "tiny", "--cores", "2")["total"]["cpu"]
    assert two["core_hours"] == pytest.approx(cpu["core_hours"])
    # two trials of 0.98 CPU and their drivers side by side, each stretched by the sharing
    assert two["wall_hours"] == pytest.approx(
        cpu["train_core_hours"] / 2 * CPU_SHARED_STRETCH + cpu["eval_core_hours"] / 2
        + (CPU_TRIAL_START_S + CPU_SWEEP_START_S) / 3600)
    # a whole CPU per worker and 0.01 for its driver: two trials do not fit two cores at once
    whole = run_plan(capsys, "fig10_k", "--preset", "tiny", "--cores", "2",
                     "--set", "cluster.cpus_per_worker=1")["total"]["cpu"]
    assert whole["wall_hours"] == pytest.approx(cpu["wall_hours"] - cpu["eval_core_hours"] / 2)


def test_the_whole_reproduction_at_cpu_scale_is_priced_sweep_by_sweep(capsys):
    whole = run_plan(capsys, "--all", "--preset", "tiny", "--cores", "2")
    assert all(r["cpu_scale"] and r["cpu"]["core_hours"] > 0 for r in whole["sweeps"])
    assert whole["total"]["cpu"]["wall_hours"] == pytest.approx(
        sum(r["cpu"]["wall_hours"] for r in whole["sweeps"]))  # the sweeps run one after another
    assert whole["cpu_basis"]["cores"] == 2 and whole["cpu_basis"]["machine"]
