"""Parameter counts (docs/official-code.md §5), construction errors, initialisation, FLOPs and `abacus-ray describe`."""

import json
import math

import pytest
import torch
from torch import nn

from abacus_ray.cli import main
from abacus_ray.config import preset
from abacus_ray.model import ArithmeticTransformer, ModelConfig


def meta_model(vocab: int = 19, **kw) -> ArithmeticTransformer:
    with torch.device("meta"):
        return ArithmeticTransformer(ModelConfig(**kw), vocab)


@pytest.mark.parametrize("positions, layers, recurrences, vocab, expected", [
    ("abacus", 16, 1, 19, 122_267_648),
    ("abacus", 8, 2, 19, 63_514_624),
    ("abacus", 4, 4, 19, 34_138_112),
    ("abacus", 2, 8, 19, 19_449_856),
    ("abacus", 1, 16, 19, 12_105_728),
    ("nope", 16, 1, 19, 121_743_360),
    ("nope", 1, 16, 19, 11_581_440),
    ("fire", 16, 1, 19, 121_752_880),
    ("abacus+fire", 16, 1, 19, 122_277_168),
    ("abacus+fire", 4, 4, 19, 34_140_492),
    ("abacus+fire", 8, 1, 118, 63_722_136),
    ("abacus+fire", 1, 8, 118, 12_309_075),
    ("fire", 16, 1, 121, 121_961_776),
    ("rope", 16, 1, 19, 121_743_360),  # RoPE adds nothing to NoPE
    ("abacus+rope", 8, 2, 19, 63_514_624),
    ("learned", 8, 2, 19, 63_514_624),  # same 512-row table as Abacus
])
def test_paper_parameter_counts(positions, layers, recurrences, vocab, expected):
    model = meta_model(vocab, positions=positions, layers=layers, recurrences=recurrences)
    assert model.num_params() == expected


def test_injection_and_recurrence_add_no_parameters_but_pre_ln_adds_one_norm():
    base = meta_model(layers=4, recurrences=4).num_params()
    assert meta_model(layers=4, recurrences=1, injection="first").num_params() == base
    assert meta_model(layers=4, recurrences=4, injection="none", eval_recurrences=9).num_params() == base
    assert meta_model(layers=4, recurrences=4, norm="pre").num_params() == base + 2 * 1024


def test_frozen_fire_l0_counts_but_does_not_train():
    model = meta_model(positions="fire", layers=2)
    fire = model.layers[0].attn.fire
    assert not fire.L0.requires_grad and fire.c.requires_grad and fire.L_mult.requires_grad
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert model.num_params() - trainable == 2


@pytest.mark.parametrize("kw, key", [
    (dict(heads=7), "model.heads"),
    (dict(layers=0), "model.layers"),
    (dict(recurrences=0), "model.recurrences"),
    (dict(intermediate=1023), "model.intermediate"),
    (dict(positions="kerple"), "model.positions"),
    (dict(injection="sometimes"), "model.injection"),
    (dict(norm="mid"), "model.norm"),
    (dict(init_state="ones"), "model.init_state"),
    (dict(eval_recurrences=0), "model.eval_recurrences"),
    (dict(positions="rope", hidden=12, heads=4), "model.heads"),  # odd head dim
])
def test_bad_model_configs_fail_at_construction(kw, key):
    with pytest.raises(ValueError, match=rf"^{key}:"):
        ModelConfig(**kw)


def test_bad_vocab_size():
    with pytest.raises(ValueError, match=r"^vocab_size:"):
        ArithmeticTransformer(ModelConfig(hidden=16, heads=2, intermediate=32, layers=1), 0)


def test_deepnorm_init_statistics():
    torch.manual_seed(0)
    h, inter = 256, 1024
    model = ArithmeticTransformer(ModelConfig(positions="abacus+fire", layers=2, recurrences=8, hidden=h,
                                              intermediate=inter, heads=4, abacus_table=64, max_k=10), 19)
    g = (8 * 16) ** -0.25  # N_eff = 16
    assert g == pytest.approx(0.29730, abs=1e-5)
    attn = model.layers[0].attn
    q, k, v = attn.qkv.weight.detach().split(h)
    xavier = lambda fan_in, fan_out, gain: gain * math.sqrt(2 / (fan_in + fan_out))  # noqa: E731
    checks = [
        (q, xavier(h, h, 1.0)), (k, xavier(h, h, 1.0)), (v, xavier(h, h, g)),
        (attn.out.weight, xavier(h, h, g)),
        (model.layers[1].ffn.w_in.weight, xavier(h, inter, g)),
        (model.layers[1].ffn.w_out.weight, xavier(inter // 2, h, g)),
        (model.adapter.weight, xavier(h, h, g)),
        (model.head.w_in.weight, xavier(h, inter, g)),
        (model.tok.weight, 1 / math.sqrt(h)),
        (model.abacus.table.weight, 1 / math.sqrt(h)),
        (attn.fire.mlp[0].weight, xavier(1, 32, g)),
    ]
    for weight, std in checks:
        assert weight.detach().std().item() == pytest.approx(std, rel=0.15)
    assert torch.all(attn.fire.mlp[0].bias == 0) and torch.all(model.final_norm.weight == 1)
    assert (attn.fire.c.item(), attn.fire.L0.item(), attn.fire.L_mult.item()) == pytest.approx((0.1, 512.0, 1.0))


def _linear_weights(module: nn.Module) -> int:
    return sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))


def test_flops_per_token_counts_every_matmul():
    """Cross-check the closed formula against the linear layers the module actually holds."""
    model = meta_model(layers=4, recurrences=3)
    seq, h = 64, 1024
    block = _linear_weights(model.layers)  # all L layers
    head = _linear_weights(model.head) + _linear_weights(model.adapter) + _linear_weights(model.decoder)
    fwd = 3 * (2 * block + 4 * seq * h * 4) + 2 * head
    assert model.flops_per_token(seq) == pytest.approx(3 * fwd)
    # no-grad recurrences cost the forward only
    grad_one = 3 * (2 * block + 4 * seq * h * 4) + 2 * (2 * block + 4 * seq * h * 4) + 3 * 2 * head
    assert model.flops_per_token(seq, 3, grad_recurrences=1) == pytest.approx(grad_one)
    assert model.flops_per_token(seq, 1.5) < model.flops_per_token(seq, 3)


def test_describe_json_reports_the_paper_8x2_count(capsys):
    rc = main(["describe", "--preset", "paper", "--set", "model.layers=8", "--set", "model.recurrences=2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["num_params"] == 63_514_624
    assert out["model"]["layers"] == 8 and out["task"] == preset("paper").to_dict()["task"]


def test_describe_text_summary(capsys):
    assert main(["describe", "--preset", "tiny", "--set", "model.positions=fire"]) == 0
    out = capsys.readouterr().out
    n = ArithmeticTransformer(preset("tiny", ["model.positions=fire"]).model, 19).num_params()
    assert f"{n:,}" in out and "model.positions = fire" in out


def test_describe_bad_config_is_one_line_exit_2(capsys):
    assert main(["describe", "--preset", "tiny", "--set", "model.heads=7"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.heads" in err
