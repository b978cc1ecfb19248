"""Position schemes: Abacus ids and offsets, table limits, FIRE bias, RoPE (docs/official-code.md §4.3-4.7)."""

import math

import pytest
import torch

from abacus_ray.model import ArithmeticTransformer, ModelConfig, abacus_positions
from abacus_ray.model.fire import FIRE, fire_positions
from abacus_ray.model.rope import apply_rope, rope_tables
from abacus_ray.tasks.tokenizer import EOS, PAD, get_tokenizer

TOK = get_tokenizer("pad")


def small(**kw) -> ModelConfig:
    base = dict(layers=1, recurrences=1, hidden=32, intermediate=64, heads=4, max_k=7, abacus_table=64)
    return ModelConfig(**{**base, **kw})


def test_abacus_ids_of_the_paper_example_at_eval():
    ids = torch.tensor([TOK.encode("98282+3859172=2787472", eos=True)])
    expected = [1, 2, 3, 4, 5, 0, *range(1, 8), 0, *range(1, 8), 0]
    assert abacus_positions(ids).tolist() == [expected]


def test_pads_and_non_digits_restart_runs():
    ids = torch.tensor([TOK.encode(" 6+6= 2 1") + [EOS, PAD, 5]])
    assert abacus_positions(ids).tolist() == [[0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1]]


def test_run_start_continues_a_run_across_a_split():
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 19, (6, 30), generator=gen)
    ids[:, 5:20] = torch.randint(4, 14, (6, 15), generator=gen)  # a long run crossing many splits
    full = abacus_positions(ids)
    for cut in (1, 7, 12, 19, 29):
        left = abacus_positions(ids[:, :cut])
        right = abacus_positions(ids[:, cut:], left[:, -1])
        assert torch.equal(torch.cat([left, right], 1), full)


def _captured_abacus_rows(model, ids, **kw):
    rows = []
    handle = model.abacus.register_forward_hook(lambda m, args, out: rows.append(args[0].clone()))
    with torch.no_grad():
        model(ids, **kw)
    handle.remove()
    return rows[0]


def test_training_offset_is_one_k_per_call_shared_by_the_batch_and_covers_0_to_max_k():
    torch.manual_seed(0)
    model = ArithmeticTransformer(small(max_k=7), 19).train()
    ids = torch.tensor([TOK.encode("98282+3859172=2787472", eos=True), TOK.encode("5+14=64 ", eos=True) + [0] * 13])
    raw = abacus_positions(ids)
    seen = set()
    for _ in range(150):
        shifted = _captured_abacus_rows(model, ids)
        ks = (shifted - raw)[raw > 0].unique().tolist()
        assert len(ks) == 1  # one k for every digit of every row
        assert torch.all(shifted[raw == 0] == 0)  # non-digits stay on row 0
        seen.add(ks[0])
    assert seen == set(range(8))
    model.eval()
    assert torch.equal(_captured_abacus_rows(model, ids), raw)  # k = 0 at eval
    assert torch.equal(_captured_abacus_rows(model, ids, abacus_offset=5), torch.where(raw > 0, raw + 5, 0))


def test_abacus_position_beyond_the_table_is_a_value_error_naming_the_key():
    model = ArithmeticTransformer(small(abacus_table=64), 19).eval()
    ids = torch.tensor([TOK.encode("1" * 63 + "+1=")])
    model(ids)  # 63 fits in 64 rows
    with pytest.raises(ValueError, match=r"^model\.abacus_table: .*64.*abacus_table=65"):
        model(torch.tensor([TOK.encode("1" * 64 + "+1=")]))
    with pytest.raises(ValueError, match=r"^model\.abacus_table: .*offset k=5"):
        model(ids, abacus_offset=5)


def test_learned_position_beyond_the_table_is_a_value_error():
    model = ArithmeticTransformer(small(positions="learned", abacus_table=16), 19).eval()
    model(torch.full((1, 16), 5))
    with pytest.raises(ValueError, match=r"^model\.abacus_table:"):
        model(torch.full((1, 17), 5))
    cache = model.new_cache()
    model(torch.full((1, 16), 5), cache=cache)
    with pytest.raises(ValueError, match=r"^model\.abacus_table:"):
        model(torch.full((1, 1), 5), cache=cache)


def test_bad_token_ids_and_shapes_are_value_errors():
    model = ArithmeticTransformer(small(), 19).eval()
    with pytest.raises(ValueError, match=r"^input_ids: token id 19"):
        model(torch.tensor([[4, 19]]))
    with pytest.raises(ValueError, match=r"^input_ids:"):
        model(torch.tensor([4, 5]))
    with pytest.raises(ValueError, match=r"^noise:"):
        model(torch.tensor([[4, 5]]), noise=torch.zeros(1, 3, 32))
    with pytest.raises(ValueError, match=r"^recurrences:"):
        model(torch.tensor([[4, 5]]), recurrences=0)
    with pytest.raises(ValueError, match=r"^grad_recurrences:"):
        model(torch.tensor([[4, 5]]), recurrences=2, grad_recurrences=3)
    with pytest.raises(ValueError, match=r"^abacus_offset:"):
        model(torch.tensor([[4, 5]]), abacus_offset=-1)


def test_fire_bias_matches_the_formula():
    torch.manual_seed(0)
    fire = FIRE(heads=3)
    with torch.no_grad():
        fire.c.fill_(0.3)
        fire.L_mult.fill_(0.01)  # threshold 5.12 < some positions: exercises max(p_i, thr)
    pos = torch.arange(9.0)
    bias = fire(pos, pos)
    assert bias.shape == (3, 9, 9)
    for i, j in [(0, 0), (4, 1), (8, 0), (8, 8), (6, 3)]:
        x = math.log1p(abs(0.3 * (i - j))) / (math.log1p(abs(0.3 * max(i, 5.12))) + 1e-6)
        want = fire.mlp(torch.tensor([[x]]))[0]
        assert torch.allclose(bias[:, i, j], want, atol=1e-5)


def test_randomised_fire_positions_are_sorted_subsets_in_training_only():
    torch.manual_seed(0)
    draws = [fire_positions(0, 10, torch.device("cpu"), randomise_to=40) for _ in range(5)]
    for p in draws:
        assert torch.all(p[1:] > p[:-1]) and p.min() >= 0 and p.max() < 40
    assert any(not torch.equal(draws[0], d) for d in draws[1:])
    assert torch.equal(fire_positions(3, 4, torch.device("cpu"), randomise_to=40), torch.arange(3.0, 7.0))
    assert torch.equal(fire_positions(0, 50, torch.device("cpu"), randomise_to=40), torch.arange(50.0))

    model = ArithmeticTransformer(small(positions="fire", fire_max_length=64), 19)
    ids = torch.randint(4, 19, (2, 12))
    noise = torch.zeros(2, 12, 32)
    model.train()
    a, b = model(ids, noise=noise), model(ids, noise=noise)
    assert not torch.allclose(a, b)  # fresh random positions every call
    model.eval()
    assert torch.equal(model(ids, noise=noise), model(ids, noise=noise))


def test_rope_scores_depend_only_on_relative_position():
    torch.manual_seed(0)
    q, k = torch.randn(8), torch.randn(8)
    cos, sin = rope_tables(torch.arange(40), 8)

    def score(m, n):
        return (apply_rope(q, cos[m], sin[m]) @ apply_rope(k, cos[n], sin[n])).item()

    assert score(5, 2) == pytest.approx(score(33, 30), abs=1e-5)
    assert score(0, 0) == pytest.approx(score(17, 17), abs=1e-5) == pytest.approx((q @ k).item(), abs=1e-5)
    assert score(5, 2) != pytest.approx(score(5, 4), abs=1e-3)
    # GPT-NeoX rotate-half convention: [x1 | x2] -> [x1 cos - x2 sin | x2 cos + x1 sin]
    cos, sin = rope_tables(torch.tensor([3]), 4)
    rotated = apply_rope(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), cos, sin)
    assert torch.allclose(rotated, torch.tensor([[math.cos(3), 0.0, math.sin(3), 0.0]]), atol=1e-6)
