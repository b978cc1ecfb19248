"""KV-cache decoding equals the full forward for every position scheme and architecture (fp32)."""

import pytest
import torch
from example_plugin import ALL_POSITIONS

from abacus_ray.model import ArithmeticTransformer, ModelConfig
from abacus_ray.tasks.tokenizer import get_tokenizer

H = 32
TOK = get_tokenizer("pad")
ARCHS = {  # name: (layers, recurrences, injection, norm)
    "looped-every": (2, 2, "every", "post"),
    "looped-first-pre": (2, 3, "first", "pre"),
    "lt-none": (1, 3, "none", "post"),
}


def build(positions: str, arch: str) -> ArithmeticTransformer:
    layers, recurrences, injection, norm = ARCHS[arch]
    torch.manual_seed(0)
    cfg = ModelConfig(positions=positions, layers=layers, recurrences=recurrences, injection=injection, norm=norm,
                      hidden=H, intermediate=64, heads=4, max_k=5, abacus_table=64, fire_max_length=64)
    return ArithmeticTransformer(cfg, 19).eval()


def problems() -> torch.Tensor:
    rows = ["98282+3859172=2787472", "5+14=64", "716+617=3331"]
    ids = [TOK.encode(r, eos=True) for r in rows]
    width = max(map(len, ids))
    return torch.tensor([r + [0] * (width - len(r)) for r in ids])


def decode_in_chunks(model, ids, noise, cuts, **kw) -> torch.Tensor:
    """Feed ids through a cache in pieces split at `cuts` (then one token at a time)."""
    cache = model.new_cache()
    bounds = [0, *cuts, *range(cuts[-1] + 1, ids.shape[1] + 1)] if cuts else [0, *range(1, ids.shape[1] + 1)]
    outs = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        outs.append(model(ids[:, a:b], noise=noise[:, a:b], cache=cache, **kw))
    assert cache.length == ids.shape[1]
    return torch.cat(outs, dim=-2)


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("positions", ALL_POSITIONS)
def test_cached_decoding_equals_the_full_forward(positions, arch):
    model = build(positions, arch)
    ids = problems()
    noise = model.initial_state(*ids.shape, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(ids, noise=noise, abacus_offset=4)
        # prefill splits inside digit runs (3, 9) and a multi-token chunk after a non-empty cache
        for cuts in ([], [3, 9], [14]):
            inc = decode_in_chunks(model, ids, noise, cuts, abacus_offset=4)
            assert torch.allclose(inc, full, atol=1e-5), cuts


@pytest.mark.parametrize("positions", ["abacus", "abacus+fire", "rope"])
def test_cached_decoding_with_all_recurrences(positions):
    model = build(positions, "looped-first-pre")
    ids = problems()
    noise = model.initial_state(*ids.shape, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = model(ids, noise=noise, all_recurrences=True)
        inc = decode_in_chunks(model, ids, noise, [14], all_recurrences=True)
    assert full.shape == (3, *ids.shape, 19)
    assert torch.allclose(inc, full, atol=1e-5)


def test_cache_keeps_the_prefill_abacus_offset_and_one_slot_per_layer_application():
    model = build("abacus", "looped-every")
    ids = problems()
    noise = model.initial_state(*ids.shape)
    with torch.no_grad():
        full = model(ids, noise=noise, abacus_offset=5)
        cache = model.new_cache()
        first = model(ids[:, :10], noise=noise[:, :10], cache=cache, abacus_offset=5)
        rest = model(ids[:, 10:], noise=noise[:, 10:], cache=cache)  # no offset given: reuse k = 5
    assert torch.allclose(torch.cat([first, rest], 1), full, atol=1e-5)
    assert cache.abacus_offset == 5 and len(cache.slots) == 2 * 2
    assert all(k.shape == (3, 4, ids.shape[1], H // 4) for k, _ in cache.slots)


def test_cache_rejects_a_different_batch_or_depth():
    model = build("nope", "looped-every")
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.tensor([[4, 5], [6, 7]]), cache=cache)
        with pytest.raises(ValueError, match=r"^cache:"):
            model(torch.tensor([[4]]), cache=cache)
        with pytest.raises(ValueError, match=r"^recurrences:"):
            model(torch.tensor([[4], [5]]), cache=cache, recurrences=3)
