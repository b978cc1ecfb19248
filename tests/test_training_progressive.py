"""Progressive loss draws (docs/official-code.md §4.13) and the masked answer loss."""

from collections import Counter
from fractions import Fraction

import pytest
import torch

from abacus_ray.model.positions import OffsetDraw
from abacus_ray.seeds import micro_batch_generator
from abacus_ray.training.objective import answer_loss, scored_targets
from abacus_ray.training.progressive import (
    backprop_limit,
    depth_distribution,
    draw_depth,
    plan_calls,
    throttle_factor,
)

# docs/official-code.md §4.13's table: (L x R) -> (M, P(total depth = R), E[k], throttle factor)
TABLE = {
    (16, 1): (1, 1.0, 1.0, 1.25),
    (8, 2): (1, 0.5, 1.0, 1.5),
    (4, 4): (2, 0.375, 1.375, 1.0),
    (2, 8): (4, 0.26, 2.125, 0.75),
    (1, 16): (8, 0.17, 3.625, 0.625),
}
DRAWS = 20_000


@pytest.mark.parametrize("layers, recurrences", list(TABLE))
def test_exact_distribution_matches_table(layers, recurrences):
    m, p_full, e_k, throttle = TABLE[(layers, recurrences)]
    assert backprop_limit(recurrences) == m
    dist = depth_distribution(recurrences, m)
    assert sum(dist.values()) == 1
    assert float(sum(p for (n, k), p in dist.items() if n + k == recurrences)) == pytest.approx(p_full, abs=0.005)
    assert float(sum(p * k for (n, k), p in dist.items())) == pytest.approx(e_k)
    assert throttle_factor(recurrences, m) == pytest.approx(throttle)


@pytest.mark.parametrize("recurrences", [2, 4, 16])
def test_sampled_draws_match_the_distribution(recurrences):
    """8x2, 4x4 and 1x16: empirical frequencies of (n, k) within 4 standard errors of the exact law."""
    m = backprop_limit(recurrences)
    gen = torch.Generator().manual_seed(1234)
    counts = Counter(draw_depth(recurrences, m, gen) for _ in range(DRAWS))
    exact = depth_distribution(recurrences, m)
    assert set(counts) <= set(exact)  # never n >= R, k > M or n + k > R
    for nk, p in exact.items():
        p = float(p)
        se = (p * (1 - p) / DRAWS) ** 0.5
        assert abs(counts[nk] / DRAWS - p) <= 4 * se + 1e-9, (nk, counts[nk] / DRAWS, p)
    full = sum(c for (n, k), c in counts.items() if n + k == recurrences) / DRAWS
    assert full == pytest.approx(TABLE[(16 // recurrences, recurrences)][1], abs=0.02)
    mean_k = sum(k * c for (n, k), c in counts.items()) / DRAWS
    assert mean_k == pytest.approx(TABLE[(16 // recurrences, recurrences)][2], abs=0.05)


def test_max_backprop_override_and_clamp():
    assert backprop_limit(16, 3) == 3
    assert backprop_limit(4, 10) == 4  # never more gradient recurrences than recurrences
    assert depth_distribution(3, 3)[(0, 3)] == Fraction(1, 9)
    with pytest.raises(ValueError, match="^recurrences"):
        backprop_limit(0)


def test_plan_calls_alpha():
    gen = torch.Generator().manual_seed(0)
    (only,) = plan_calls(16, 8, 1.0, gen, OffsetDraw(100))
    assert only.weight == 1.0 and 0 <= only.n <= 15 and 1 <= only.k <= min(16 - only.n, 8)
    assert 0 <= only.abacus_offset <= 100
    full, prog = plan_calls(16, 8, 0.25, gen, None)
    assert (full.weight, full.n, full.k, full.abacus_offset) == (0.75, 8, 8, None)
    assert prog.weight == 0.25
    (full_only,) = plan_calls(4, 2, 0.0, gen, OffsetDraw(0))
    assert (full_only.n, full_only.k, full_only.abacus_offset) == (2, 2, 0)


def test_draws_are_a_function_of_seed_and_index():
    def draws(seed, index):
        return plan_calls(16, 8, 1.0, micro_batch_generator(seed, index), OffsetDraw(100))

    assert draws(3, 17) == draws(3, 17)
    assert len({tuple(draws(3, i)) for i in range(30)}) > 10
    assert draws(3, 5) != draws(4, 5) or draws(3, 6) != draws(4, 6)
    offsets = Counter(draws(0, i)[0].abacus_offset for i in range(3000))
    assert min(offsets) == 0 and max(offsets) == 100  # k ~ U{0..100}, both ends included


def _toy():
    # two rows: "12+3=51" + EOS then pads; '=' at index 4
    ids = torch.tensor([[5, 6, 14, 7, 17, 9, 5, 3, 0],
                        [6, 14, 6, 17, 8, 3, 0, 0, 0]])
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[0, 5:8] = True
    mask[1, 4:6] = True
    return ids, mask


def test_scored_targets_and_reductions():
    ids, mask = _toy()
    scored = scored_targets(ids, mask, True)
    assert scored.sum() == 5 and scored[0, 4:7].all() and scored[1, 3:5].all()
    everything = scored_targets(ids, mask, False)
    assert everything.sum() == (ids[:, 1:] != 0).sum() == 12

    torch.manual_seed(0)
    logits = torch.randn(2, 9, 19)
    ce = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 19), ids[:, 1:].reshape(-1),
                                           reduction="none").view(2, 8)
    mean = answer_loss(logits, ids, mask)
    assert mean == pytest.approx(float(ce[scored].mean()), rel=1e-6)
    none = answer_loss(logits, ids, mask, reduction="none")
    assert none == pytest.approx(float(ce[scored].sum() / (2 * 8)), rel=1e-6)
    prompt_too = answer_loss(logits, ids, mask, mask_before_equals=False)
    assert prompt_too == pytest.approx(float(ce[everything].mean()), rel=1e-6)


def test_loss_gradient_ignores_unscored_positions():
    ids, mask = _toy()
    logits = torch.randn(2, 9, 19, requires_grad=True)
    answer_loss(logits, ids, mask).backward()
    grad_rows = logits.grad.abs().sum(-1)
    assert (grad_rows[0, :4] == 0).all() and (grad_rows[0, 4:7] > 0).all() and (grad_rows[0, 7:] == 0).all()
    with pytest.raises(ValueError, match="^reduction"):
        answer_loss(logits, ids, mask, reduction="sum")
