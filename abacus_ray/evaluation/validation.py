"""The validation score: exact match on a few long diagonal cells, scored while a model trains.

It is the metric a search stops trials on (`figures/extrapolation_10x.py`, Tune's ASHA scheduler):
how far a model extrapolates shows in cells (n, n) beyond the training length long before the
final grid evaluation. Scoring is the teacher-forced exact match of the grid evaluator (one forward
pass per batch, verdicts equal to greedy decoding's; `evaluation/teacher_forcing.py`), in fp32.

The problems are a validation set: drawn with seed `eval.seed + 1` (`seeds.validation_seed`), so
a search that selects on this score never sees the problems the final grid evaluation scores. The
training loop scores it in eval mode under a forked RNG and puts the model back in train mode
(`training/loop.py`), so training with validation gives the same weights as training without it
(tests/test_training_loop.py).
"""

from __future__ import annotations

from torch import nn

from abacus_ray.config import ExperimentConfig
from abacus_ray.config.task import EVAL_TASKS
from abacus_ray.evaluation.engine import PreparedCell, run_cells
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.runner import prepare
from abacus_ray.seeds import validation_seed


class Validation:
    """Scores a model on `eval.validation_lengths` diagonal cells:
    {"validation": mean, "validation_<n>": each}."""

    def __init__(self, cfg: ExperimentConfig) -> None:
        ev = cfg.eval
        if not ev.validation_lengths:
            raise ValueError("eval.validation_lengths: empty; give the diagonal lengths to "
                             "validate on, "
                             "e.g. --set eval.validation_lengths=8,12,16")
        task = EVAL_TASKS.get(cfg.task.name, (cfg.task.name,))[0]  # addsub: validated on +
        cells = [Cell(task, n, n) for n in ev.validation_lengths]
        self.cells: list[PreparedCell] = prepare(cfg, cells, ev.validation_per_cell,
                                                 validation_seed(ev.seed))

    @classmethod
    def of(cls, cfg: ExperimentConfig) -> Validation | None:
        """The experiment's validation score, or None when it asks for none."""
        return cls(cfg) if cfg.eval.validation_lengths else None

    def __call__(self, model: nn.Module) -> dict[str, float]:
        """Exact match per validated length and their mean; leaves the model in eval mode."""
        outcomes = run_cells(model, self.cells, engine="teacher", precision="fp32")
        scores = {f"validation_{o.cell.i}": o.n_correct / o.n for o in outcomes}
        return {"validation": sum(scores.values()) / len(scores), **scores}
