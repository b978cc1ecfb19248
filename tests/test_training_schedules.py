"""The budget-keyed schedules (docs/official-code.md §6.3, §6.5), the budget fraction and AdamW's parameter groups."""

import pytest
import torch
from torch import nn

from abacus_ray.config.model import ModelConfig
from abacus_ray.config.train import TrainConfig
from abacus_ray.model.transformer import ArithmeticTransformer
from abacus_ray.training.budget import Budget
from abacus_ray.training.optimizer import build_optimizer, decays, parameter_groups
from abacus_ray.training.schedules import (
    accumulation_steps,
    fake_step,
    lr_multiplier,
    ramped_batch_size,
)

FRACTIONS = (0.0, 0.05, 0.5, 0.6, 0.95, 1.0)


@pytest.mark.parametrize("f, expected", [
    (0.0, 0.0),           # warm-up starts at 0
    (0.05, 0.5),          # fake 600,000 / 1,200,000
    (0.5, 1.0),           # plateau
    (0.6, 1.0),
    (0.95, 0.5),          # (12e6 - 11.4e6) / 1.2e6
    (1.0, 0.0),           # cooled down to 0
    (0.025, 0.25),
    (0.9, 1.0),           # fake 10.8e6 is not yet "> 10.8e6"
    (0.975, 0.25),
])
def test_trapezoid_matches_spec(f, expected):
    assert lr_multiplier(f, 0.1, 0.1) == pytest.approx(expected, abs=1e-9)


def test_first_call_is_zero_and_schedule_is_clamped():
    assert lr_multiplier(0.5, 0.1, 0.1, first_call=True) == 0.0
    assert lr_multiplier(1.5, 0.1, 0.1) == 0.0  # floored at 0 past the budget
    assert lr_multiplier(0.0, 0.0, 0.0) == 1.0  # no warm-up: full lr at once
    assert lr_multiplier(0.99, 0.0, 0.0) == 1.0
    assert lr_multiplier(0.55, 0.5, 0.5) == pytest.approx(0.9)
    assert fake_step(0.05) == 600_000


@pytest.mark.parametrize("f, expected", [
    # docs/official-code.md §6.5's worked examples for micro-batch 512, global batch 8192, ramp 0.6
    (0.0, 512), (0.05, 1024), (0.1, 1536), (0.2, 3072), (0.3, 4096), (0.4, 5632), (0.5, 7168),
    (0.6, 8192), (0.95, 8192), (1.0, 8192),
])
def test_batch_ramp_mbs512(f, expected):
    assert ramped_batch_size(f, 8192, 512, 0.6) == expected


@pytest.mark.parametrize("f, expected", [
    # micro-batch 256: floor(fake * 8192 / 7.2e6 / 256) + 1 micro-batches
    (0.0, 256), (0.05, 768), (0.5, 6912), (0.6, 8192), (0.95, 8192), (1.0, 8192),
])
def test_batch_ramp_mbs256(f, expected):
    assert ramped_batch_size(f, 8192, 256, 0.6) == expected


def test_batch_ramp_multi_gpu_and_off():
    # multiplication: 512 x 8 GPUs = 4096 effective; full batch from t/T ~ 0.3 on (exactly 0.3 still
    # rounds down in the official float arithmetic, like mbs 512 at 0.3 -> 4096 above)
    assert [ramped_batch_size(f, 8192, 4096, 0.6) for f in (0.0, 0.29, 0.3, 0.31, 0.6)] == [4096] * 3 + [8192] * 2
    assert ramped_batch_size(0.0, 64, 64, 0.0) == 64
    assert ramped_batch_size(0.0, 8192, 512, 0.0) == 8192  # ramp off: the global batch at once
    for f in FRACTIONS:  # always a multiple of the effective micro-batch, or the global batch
        b = ramped_batch_size(f, 1000, 96, 0.6)
        assert b == 1000 or b % 96 == 0


def test_accumulation_rounds_up():
    assert accumulation_steps(8192, 512) == 16
    assert accumulation_steps(1000, 96) == 11
    with pytest.raises(ValueError, match="^batch_size"):
        accumulation_steps(0, 512)


def test_schedule_argument_errors_name_the_argument():
    with pytest.raises(ValueError, match="^micro_batch_eff"):
        ramped_batch_size(0.5, 8192, 0, 0.6)
    with pytest.raises(ValueError, match="^fraction"):
        lr_multiplier(float("nan"))


def test_budget_fraction_is_the_largest_part():
    b = Budget(budget_hours=1e9, max_steps=100, max_samples=1000)
    b.step, b.samples = 10, 500
    assert b.fraction() == pytest.approx(0.5)
    b.step = 80
    assert b.fraction() == pytest.approx(0.8)
    assert not b.exhausted()
    b.step = 100
    assert b.exhausted()
    hours = Budget(budget_hours=2.0, world_size=4, hours_before=1.0)
    assert hours.fraction() == pytest.approx(0.5, abs=1e-3)  # 1 device-hour spent before a resume
    hours.set_session_elapsed(900.0)  # 0.25 h of wall time x 4 devices = 1 device-hour
    assert hours.device_hours == pytest.approx(2.0)
    assert hours.exhausted()


def test_budget_state_round_trip():
    b = Budget(budget_hours=10.0, max_steps=50)
    b.step, b.samples, b.hours_before = 7, 448, 0.25
    c = Budget(budget_hours=10.0, max_steps=50)
    c.restore(b.state())
    assert (c.step, c.samples) == (7, 448)
    assert c.device_hours == pytest.approx(0.25, abs=1e-4)


def test_no_decay_for_bias_and_norm_names():
    assert decays("layers.0.attn.qkv.weight")
    assert decays("tok.weight") and decays("abacus.table.weight")
    assert not decays("layers.0.norm1.weight")
    assert not decays("encoder.LayerNorm.weight")
    assert not decays("layers.0.fire.mlp.0.bias")


def test_every_layernorm_of_the_model_is_exempt_from_decay():
    model = ArithmeticTransformer(ModelConfig(layers=2, hidden=32, intermediate=64, heads=4, abacus_table=32,
                                              positions="abacus+fire", norm="pre"), vocab_size=19)
    decay, keep = parameter_groups(model, 0.01)
    norm_params = {f"{m}.{p}" for m, mod in model.named_modules() if isinstance(mod, nn.LayerNorm)
                   for p, _ in mod.named_parameters(recurse=False)}
    assert norm_params and norm_params <= set(keep["names"])
    assert not any("norm" in n.lower() or "bias" in n.lower() for n in decay["names"])
    assert "decoder.weight" in decay["names"] and "tok.weight" in decay["names"]
    total = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert sum(p.numel() for g in (decay, keep) for p in g["params"]) == total

    opt = build_optimizer(model, TrainConfig(lr=3e-3))
    assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0]
    assert opt.defaults["betas"] == (0.9, 0.98) and opt.defaults["eps"] == 1e-12
    assert isinstance(opt, torch.optim.AdamW)
