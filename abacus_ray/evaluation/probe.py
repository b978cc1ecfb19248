"""The probe: exact match on a few long diagonal cells, scored while a model trains.

It is the metric a search stops trials on (`figures/extrapolation_10x.py`, Tune's ASHA scheduler):
how far a model extrapolates shows in cells (n, n) beyond the training length long before the
final grid evaluation. Scoring is the teacher-forced exact match of the grid evaluator (one forward
pass per batch, verdicts equal to greedy decoding's; `evaluation/teacher_forcing.py`), in fp32.

The problems are a validation set: drawn with seed `eval.seed + 1` (`seeds.probe_seed`), so a search
that selects on the probe never sees the problems the final grid evaluation scores. The training
loop calls the probe in eval mode under a forked RNG and puts the model back in train mode
(`training/loop.py`), so training with a probe gives the same weights as training without one
(tests/test_training_loop.py).
"""

from __future__ import annotations

from torch import nn

from abacus_ray.config import ExperimentConfig
from abacus_ray.config.task import EVAL_TASKS
from abacus_ray.evaluation.engine import PreparedCell, run_cells
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.runner import prepare
from abacus_ray.seeds import probe_seed


class Probe:
    """Scores a model on `eval.probe_lengths` diagonal cells: {"probe": mean, "probe_<n>": each}."""

    def __init__(self, cfg: ExperimentConfig) -> None:
        ev = cfg.eval
        if not ev.probe_lengths:
            raise ValueError("eval.probe_lengths: empty; give the diagonal lengths to probe, "
                             "e.g. --set eval.probe_lengths=8,12,16")
        task = EVAL_TASKS.get(cfg.task.name, (cfg.task.name,))[0]  # addsub: probed on +
        self.cells: list[PreparedCell] = prepare(cfg, [Cell(task, n, n) for n in ev.probe_lengths],
                                                 ev.probe_per_cell, probe_seed(ev.seed))

    @classmethod
    def of(cls, cfg: ExperimentConfig) -> Probe | None:
        """The experiment's probe, or None when it asks for none."""
        return cls(cfg) if cfg.eval.probe_lengths else None

    def __call__(self, model: nn.Module) -> dict[str, float]:
        """Exact match per probed length and their mean; leaves the model in eval mode."""
        outcomes = run_cells(model, self.cells, engine="teacher", precision="fp32")
        scores = {f"probe_{o.cell.i}": o.n_correct / o.n for o in outcomes}
        return {"probe": sum(scores.values()) / len(scores), **scores}
