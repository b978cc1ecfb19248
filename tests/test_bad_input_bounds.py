"""Bad input (4/4): big numbers. Every count, size and length a user can set is bounded before work starts
(config/bounds.py for the config's values, model/memory.py for a model or batch against the device's
memory, sweep.MAX_TRIALS for a sweep's cross product): one stderr line naming the value and its bound,
exit 2, nothing written, no Ray started. Plus a fuzz of `--set` values: each gives a valid config (whose
model is then described) or one line naming a key, never a traceback or a hang.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusal import FUZZ, SMALL, assert_refused, fresh_dir, run, tally
from test_bad_input import FIELDS

from abacus_ray.config import bounds, preset
from abacus_ray.model.memory import device_memory, num_params
from abacus_ray.sweep import MAX_TRIALS

BIG = 10**9


# --- the reproducers: each was a hang, a traceback or an allocation of gigabytes -------------------------

@pytest.mark.parametrize("argv, culprit", [
    (["sweep", "fig10_k", "--dry-run", "--seeds", str(BIG)], "--seeds"),  # grew to 23 GB
    (["sweep", "fig10_k", "--dry-run", "--seeds", "20000"], "--seeds"),  # over a minute
    (["sweep", "fig10_k", "--dry-run", "--set", "model.layers=1000000000"], "model.layers"),
    (["sweep", "fig10_k", "--num-cpus", str(BIG), "--storage", "{work}/sweep"], "--num-cpus"),
    (["describe", "--set", f"model.layers={BIG}"], "model.layers"),  # hung building the model
    (["describe", "--set", f"model.hidden={BIG}"], "model.hidden"),  # a 40-line traceback
    (["describe", "--set", f"model.recurrences={BIG}"], "model.recurrences"),
    (["describe", "--set", f"task.train_max_len={BIG}", "--set", f"model.abacus_table={BIG + 200}"],
     "task.train_max_len"),
    (["train", "--out", "{work}/t", "--set", f"task.train_max_len={BIG}", "--set", f"model.abacus_table={BIG + 200}"],
     "task.train_max_len"),  # 128 G parameters, died allocating 512 GB
    (["train", "--out", "{work}/t", "--set", "eval.validation_lengths=1000000000"], "eval.validation_lengths"),
    (["eval", "{ckpt}", "--out", "{work}/o", "--cells", "1x1", "--per-cell", "1000000000000"], "eval.per_cell"),  # 29 TiB
    (["eval", "{ckpt}", "--out", "{work}/o", "--cells", "1x1", "--token-budget", str(1 << 40)], "eval.token_budget"),
    (["eval", "{ckpt}", "--out", "{work}/o", "--cells", "1x1", "--recurrences", str(BIG)], "eval.recurrences"),
    # astronomical budgets: an OverflowError traceback (1e308 A4000-hours), a plan stepping through 2**63 steps
    (["plan", "fig10_k", "--set", "train.budget_a4000_hours=1e308"], "train.budget_a4000_hours"),
    (["plan", "fig10_k", "--set", "train.budget_a4000_hours=null", "--set", "train.budget_hours=1e308"],
     "train.budget_hours"),
    (["plan", "fig10_k", "--set", "train.budget_a4000_hours=null", "--set", f"train.max_steps={2**63 - 1}"],
     "train.max_steps"),
    (["plan", "fig10_k", "--set", f"train.max_samples={2**63 - 1}"], "train.max_samples"),
    (["train", "--out", "{work}/t", "--set", "train.budget_a4000_hours=1e308"], "train.budget_a4000_hours"),
    (["sweep", "fig10_k", "--dry-run", "--budget-hours", "1e308"], "train.budget_hours"),
])
def test_big_numbers_are_refused_before_work(argv, culprit, ckpt, work, no_ray):
    argv = [a.format(work=work, ckpt=ckpt) for a in argv]
    message = assert_refused(argv, culprit, "big numbers: config and flag bounds", roots=[work])
    assert "bound" in message or "must be in" in message, message


@pytest.mark.slow  # over a second: out of the fast tier
def test_a_plan_at_the_step_bound_is_priced_in_seconds(no_ray):
    """10^12 optimiser steps (the bound) are priced without stepping through them: a finite plan."""
    code, out, err = run(["plan", "fig10_k", "--json", "--gpu", "H100", "--set", "train.budget_a4000_hours=null",
                          "--set", f"train.max_steps={bounds.MAX_STEPS}"])
    assert code == 0 and err == "", err
    total = json.loads(out)["total"]
    assert math.isfinite(total["a4000_hours"]) and total["a4000_hours"] > 0


@pytest.mark.slow  # over a second: out of the fast tier
def test_a_sweep_just_under_the_trial_bound_expands_and_one_over_is_refused(work, no_ray):
    per_seed = 2  # fig10_k's tiny preset: k = 1, 12
    code, out, err = run(["sweep", "fig10_k", "--dry-run", "--seeds", str(MAX_TRIALS // per_seed)])
    assert code == 0 and err == "" and len(json.loads(out)["trials"]) == MAX_TRIALS // per_seed * per_seed
    message = assert_refused(["sweep", "fig10_k", "--dry-run", "--seeds", str(MAX_TRIALS // per_seed + 1)], "--seeds",
                             "big numbers: sweep trial count", roots=[work])
    assert f"{MAX_TRIALS:,}" in message


def test_a_checkpoint_config_beyond_the_bounds_is_refused_naming_the_file(ckpt, work):
    for key, value in (("hidden", BIG), ("layers", BIG), ("abacus_table", 10**12)):
        target = fresh_dir(work) / "ck"
        shutil.copytree(ckpt, target)
        cfg = json.loads((target / "config.json").read_text())
        cfg["model"][key] = value
        (target / "config.json").write_text(json.dumps(cfg))
        message = assert_refused(["eval", str(target), "--out", str(target.parent / "o"), "--cells", "1x1", "--quiet"],
                                 str(target / "config.json"), "big numbers: checkpoint config.json", roots=[work])
        assert f"model.{key}: {value:,} is beyond the bound" in message
        assert_refused(["describe", str(target)], str(target / "config.json"), "big numbers: checkpoint config.json",
                       roots=[work])
        shutil.rmtree(target.parent)


# --- memory: within every bound, yet beyond any machine's memory ---------------------------------------------

def test_a_model_or_micro_batch_beyond_the_device_memory_is_refused_before_anything_is_built(work, no_ray):
    huge = ["--set", "model.hidden=65536", "--set", "model.intermediate=262144", "--set", "model.heads=64"]
    cfg = preset("tiny", [a for a in huge if a != "--set"])
    assert 16 * num_params(cfg) > device_memory("cpu")  # 116 G parameters: 1.7 TB of training state
    message = assert_refused(["train", "--out", str(work / "t"), "--device", "cpu", *huge], "model: training a",
                             "big numbers: memory", roots=[work])
    assert "GiB of cpu memory" in message
    # a small model, but a micro-batch of a million samples of 30,004 tokens: about 100 TB of activations
    batch = ["--set", "train.micro_batch=1048576", "--set", "train.global_batch=1048576",
             "--set", "task.train_max_len=10000", "--set", "model.abacus_table=20100"]
    assert_refused(["train", "--out", str(work / "t"), "--device", "cpu", *batch], "train.micro_batch",
                   "big numbers: memory", roots=[work])
    assert_refused(["sweep", "fig10_k", "--storage", str(work / "s"), *huge], "model: training a",
                   "big numbers: memory", roots=[work])
    assert not (work / "t").exists() and not (work / "s").exists()


@pytest.fixture(scope="module")
def nope_ckpt(work) -> Path:
    """A noise-state model without a position table: any length can be asked of it."""
    from refusal import SMALL_MODEL, _save

    return _save(work / "nope-ckpt", [*SMALL_MODEL, "model.positions=nope"])


def test_an_evaluation_beyond_the_device_memory_is_refused_before_a_row_is_written(nope_ckpt, work):
    out = work / "never-written"
    # 100,000 problems of ~300,000 tokens: ~2 TB of initial-state noise for the one cell
    message = assert_refused(["eval", str(nope_ckpt), "--out", str(out), "--diagonal", "100000", "--per-cell",
                              "100000", "--device", "cpu", "--quiet"], "eval.per_cell", "big numbers: memory",
                             roots=[work])
    assert "GiB of cpu memory" in message and not out.exists()


# --- fuzz: any --set value is a valid config or one line naming a key -----------------------------------------

NUMERIC = sorted(k for k, tp in FIELDS.items() if "int" in str(tp) or "float" in str(tp))
VALUES = st.one_of(
    st.integers(min_value=-10, max_value=10**20),
    st.integers(min_value=0, max_value=64).map(lambda e: 2**e),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["1e9", "1e30", "inf", "-inf", "nan", "1_000_000_000", "9" * 30, "", "none", "0x10", "  7 "]),
)
KEYS = st.sampled_from(NUMERIC) | st.sampled_from(sorted(FIELDS))


def _describe_or_refuse(items: list[str]) -> str | None:
    """None when `items` make a valid config (whose model is built on the meta device and counted, as
    `describe` does), else the refusal message; anything else (a traceback) fails the test."""
    try:
        cfg = preset("tiny", items)
    except ValueError as e:
        message = str(e)
        assert "\n" not in message and len(message) < 400, message
        assert re.sub(r"\[\d+\]$", "", message.split(":", 1)[0]) in FIELDS, message
        return message
    assert cfg.model.layers <= bounds.MAX_LAYERS and cfg.task.train_max_len <= bounds.MAX_LENGTH
    assert num_params(cfg) > 0
    return None


@settings(FUZZ, max_examples=120)
@given(key=KEYS, value=VALUES, other=st.tuples(KEYS, VALUES))
def test_fuzzed_set_values_give_a_config_or_one_line(key, value, other):
    items = [f"{key}={value}", f"{other[0]}={other[1]}"]
    if _describe_or_refuse(items) is not None:
        tally("big numbers: --set fuzz (in-process)")


@SMALL
@given(key=st.sampled_from(NUMERIC), value=st.integers(min_value=10**6, max_value=10**19))
def test_fuzzed_big_set_values_through_the_cli(key, value, work):
    item = f"{key}={value}"
    message = _describe_or_refuse([item])
    if message is None:  # e.g. a seed or a step count: big is fine there
        code, out, err = run(["describe", "--set", item])
        assert code == 0 and err == "", err
        return
    assert_refused(["describe", "--set", item], message.split(":", 1)[0], "big numbers: --set fuzz (CLI)",
                   roots=[work])


def test_the_bounds_leave_the_papers_settings_alone():
    """Every sweep of sweeps/ on both presets expands within the bounds (the paper preset's fig9 is 108 trials)."""
    from abacus_ray.api.sweeps import available, load_sweep

    for name in available():
        for preset_name in ("tiny", "paper"):
            assert load_sweep(name).expand(preset_name), (name, preset_name)
