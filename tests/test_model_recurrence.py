"""Causality, the recurrent loop, input injection, truncated backprop and per-recurrence outputs."""

import itertools

import pytest
import torch
from example_plugin import ALL_POSITIONS

from abacus_ray.config.model import INJECTIONS
from abacus_ray.model import ArithmeticTransformer, ModelConfig, abacus_positions

H = 32


def small(**kw) -> ModelConfig:
    base = dict(layers=2, recurrences=2, hidden=H, intermediate=64, heads=4, max_k=5, abacus_table=64)
    return ModelConfig(**{**base, **kw})


def build(seed: int = 0, **kw) -> ArithmeticTransformer:
    torch.manual_seed(seed)
    return ArithmeticTransformer(small(**kw), 19).eval()


def batch(b: int = 3, s: int = 14, seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 19, (b, s), generator=gen)
    ids[:, 2:7] = torch.randint(4, 14, (b, 5), generator=gen)  # guarantee digit runs
    return ids


def noise_for(ids: torch.Tensor, seed: int = 2) -> torch.Tensor:
    return 0.02 * torch.randn(*ids.shape, H, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("positions, injection, norm",
                         list(itertools.product(ALL_POSITIONS, INJECTIONS, ("post", "pre"))))
def test_changing_a_later_token_never_changes_earlier_logits(positions, injection, norm):
    model = build(positions=positions, injection=injection, norm=norm)
    ids = batch()
    later = ids.clone()
    later[:, 9:] = (later[:, 9:] + 5) % 19
    noise = noise_for(ids)
    with torch.no_grad():
        a = model(ids, noise=noise, all_recurrences=True)
        b = model(later, noise=noise, all_recurrences=True)
    assert torch.allclose(a[:, :, :9], b[:, :, :9], atol=1e-6)
    assert not torch.allclose(a[:, :, 9:], b[:, :, 9:], atol=1e-3)


@pytest.mark.parametrize("positions", ["abacus", "fire", "abacus+fire"])
def test_causality_in_training_mode_with_random_offset_and_randomised_fire(positions):
    model = build(positions=positions, fire_max_length=40).train()
    ids = batch()
    later = ids.clone()
    later[:, 11:] = 4
    noise = noise_for(ids)
    torch.manual_seed(5)
    a = model(ids, noise=noise)
    torch.manual_seed(5)
    b = model(later, noise=noise)
    assert torch.allclose(a[:, :11], b[:, :11], atol=1e-6)


def reference(model: ArithmeticTransformer, ids, noise, recurrences: int) -> torch.Tensor:
    """The loop written out by hand with the model's own weights (eval mode, Abacus k = 0)."""
    inj = model.cfg.injection
    e = model.emb_norm(model.tok(ids) + model.abacus(abacus_positions(ids)))
    s = noise
    for r in range(recurrences):
        for index, layer in enumerate(model.layers):
            if inj == "every" or (index == 0 and (inj == "first" or r == 0)):
                s = s + e
            s = layer(s)[0]
    return model.decoder(model.adapter(model.final_norm(model.head(s))))


@pytest.mark.parametrize("injection", INJECTIONS)
@pytest.mark.parametrize("recurrences", [1, 3])
def test_looped_model_equals_hand_unrolled_reference(injection, recurrences):
    model = build(injection=injection, recurrences=recurrences)
    ids = batch()
    noise = noise_for(ids)
    with torch.no_grad():
        assert torch.allclose(model(ids, noise=noise), reference(model, ids, noise, recurrences), atol=1e-5)


def _unrolled_copy(model: ArithmeticTransformer, injection: str) -> ArithmeticTransformer:
    """An (L*R) x 1 model whose layer r*L + l carries the weights of layer l."""
    c = model.cfg
    flat = ArithmeticTransformer(small(layers=c.layers * c.recurrences, recurrences=1, injection=injection), 19).eval()
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("layers.")}
    for k, v in model.state_dict().items():
        if k.startswith("layers."):
            _, layer, rest = k.split(".", 2)
            for r in range(c.recurrences):
                state[f"layers.{r * c.layers + int(layer)}.{rest}"] = v
    flat.load_state_dict(state)
    return flat


@pytest.mark.parametrize("injection, flat_injection", [("every", "every"), ("none", "first")])
def test_looped_model_equals_a_deep_model_with_repeated_weights(injection, flat_injection):
    model = build(injection=injection, layers=2, recurrences=3)
    flat = _unrolled_copy(model, flat_injection)
    ids = batch()
    noise = noise_for(ids)
    with torch.no_grad():
        assert torch.allclose(model(ids, noise=noise), flat(ids, noise=noise), atol=1e-5)


def _same_weights(injection: str, like: ArithmeticTransformer) -> ArithmeticTransformer:
    other = ArithmeticTransformer(small(**{**like.cfg.__dict__, "injection": injection}), 19).eval()
    other.load_state_dict(like.state_dict())
    return other


def test_injection_variants_differ_exactly_where_the_spec_says():
    ids = batch()
    noise = noise_for(ids)
    with torch.no_grad():
        one = build(layers=1, recurrences=3, injection="every")
        assert torch.equal(one(ids, noise=noise), _same_weights("first", one)(ids, noise=noise))  # L = 1
        single = build(layers=2, recurrences=1, injection="first")
        assert torch.equal(single(ids, noise=noise), _same_weights("none", single)(ids, noise=noise))  # R = 1
        looped = build(layers=2, recurrences=2, injection="every")
        out = {inj: _same_weights(inj, looped)(ids, noise=noise) for inj in INJECTIONS}
    assert not torch.allclose(out["every"], out["first"], atol=1e-4)
    assert not torch.allclose(out["first"], out["none"], atol=1e-4)


def test_grad_recurrences_builds_graph_only_for_the_last_k():
    model = build(layers=2, recurrences=3).train()
    ids = batch()
    flags = []
    hooks = [layer.register_forward_hook(lambda m, a, out: flags.append(out[0].requires_grad))
             for layer in model.layers]
    noise = noise_for(ids).requires_grad_()
    full = model(ids, noise=noise, abacus_offset=0)
    assert flags == [True] * 6
    full.sum().backward()
    assert noise.grad is not None and noise.grad.abs().sum() > 0

    for k in (2, 1, 0):
        flags.clear()
        model.zero_grad()
        noise.grad = None
        out = model(ids, noise=noise, abacus_offset=0, grad_recurrences=k)
        assert flags == [False] * (2 * (3 - k)) + [True] * (2 * k)
        assert torch.allclose(out, full, atol=1e-6)  # same values, shorter graph
        out.sum().backward()
        assert noise.grad is None  # the noise only enters the first (no-grad) recurrence
        tok_grad = model.tok.weight.grad
        assert (tok_grad is not None and tok_grad.abs().sum() > 0) == (k > 0)  # injection carries gradient
        assert model.decoder.weight.grad.abs().sum() > 0
    for h in hooks:
        h.remove()


def test_all_recurrences_returns_the_readout_after_every_recurrence():
    model = build(layers=1, recurrences=4, positions="abacus+rope")
    ids = batch()
    noise = noise_for(ids)
    with torch.no_grad():
        steps = model(ids, noise=noise, all_recurrences=True)
        assert steps.shape == (4, *ids.shape, 19)
        for r in range(4):
            assert torch.allclose(steps[r], model(ids, noise=noise, recurrences=r + 1), atol=1e-6)
        assert not torch.allclose(steps[0], steps[3], atol=1e-4)


def test_default_recurrences_follow_the_mode_and_eval_recurrences():
    model = build(recurrences=2, eval_recurrences=3)
    ids = batch()
    noise = noise_for(ids)
    with torch.no_grad():
        three = model(ids, noise=noise, recurrences=3)
        assert torch.equal(model(ids, noise=noise), three)
        model.train()
        two = model(ids, noise=noise, recurrences=2, abacus_offset=0)
        assert torch.equal(model(ids, noise=noise, abacus_offset=0), two)
    assert not torch.allclose(two, three, atol=1e-4)


def test_deterministic_given_noise_and_offset_and_noise_drawn_from_global_rng():
    model = build().train()
    ids = batch()
    noise = noise_for(ids)
    a = model(ids, noise=noise, abacus_offset=2)
    torch.manual_seed(123)  # the global RNG does not matter once noise and offset are given
    assert torch.equal(a, model(ids, noise=noise, abacus_offset=2))
    torch.manual_seed(7)
    b = model(ids, abacus_offset=2)
    c = model(ids, abacus_offset=2)
    torch.manual_seed(7)
    assert torch.equal(b, model(ids, abacus_offset=2)) and not torch.allclose(b, c)


def test_zero_initial_state_is_deterministic_without_noise():
    model = build(init_state="zeros")
    ids = batch()
    with torch.no_grad():
        assert torch.equal(model(ids), model(ids, noise=torch.zeros(*ids.shape, H)))


@pytest.mark.slow  # torch.compile
def test_torch_compile_traces_the_noise_initial_state_at_varying_lengths():
    """The whole model under torch.compile (what `train.compile` did before it compiled the block alone,
    and what a user may do for evaluation): the forward draws the noise initial state itself
    (noise=None) and lengths vary, so the draw must trace with a symbolic length. Dynamo's tracing
    is what failed (`randn(..., generator=None)`), so the eager backend is enough to check it."""
    torch._dynamo.reset()
    model = build().train()
    compiled = torch.compile(model, backend="eager")  # shapes turn dynamic on change
    for s in (14, 17, 11):
        ids = batch(s=s)
        logits = compiled(ids, abacus_offset=0)
        assert logits.shape == (3, s, 19) and torch.isfinite(logits).all()
        noise = noise_for(ids)
        torch.testing.assert_close(compiled(ids, noise=noise, abacus_offset=0), model(ids, noise=noise, abacus_offset=0))
