"""End to end: the `tiny` preset learns addition up to 5 digits on CPU (slow: ~2 minutes on 2 cores)."""

import pytest

from abacus_ray.config import preset
from abacus_ray.evaluation.engine import prepare_cell, run_cells
from abacus_ray.evaluation.grids import Cell
from abacus_ray.tasks.evalsets import eval_problems
from abacus_ray.tasks.tokenizer import get_tokenizer
from abacus_ray.training.loop import train

SEED = 0
PER_CELL = 20


def in_distribution_accuracy(model, n: int, eval_seed: int = 0) -> tuple[float, dict]:
    """Greedy exact match (teacher-forced engine, EOS included) over the 1..n x 1..n cells."""
    tok = get_tokenizer("pad")
    cells = [prepare_cell(Cell("add", i, j), eval_problems("add", i, j, PER_CELL, eval_seed), tok, eval_seed)
             for i in range(1, n + 1) for j in range(1, n + 1)]
    outcomes = run_cells(model, cells, engine="teacher")
    per_cell = {(o.cell.i, o.cell.j): o.n_correct / o.n for o in outcomes}
    return sum(o.n_correct for o in outcomes) / sum(o.n for o in outcomes), per_cell


@pytest.mark.slow
@pytest.mark.scenario
@pytest.mark.cost(270)
def test_tiny_learns_five_digit_addition():
    cfg = preset("tiny", [f"seed={SEED}", "train.budget_hours=1000"])  # the preset's steps budget alone
    assert cfg.train.max_steps is not None and cfg.task.train_max_len == 5
    result = train(cfg)
    accuracy, per_cell = in_distribution_accuracy(result.model, cfg.task.train_max_len)
    assert accuracy >= 0.95, (accuracy, {k: v for k, v in per_cell.items() if v < 1})
    assert result.losses[-1] < result.losses[0] / 10
