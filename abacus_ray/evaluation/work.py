"""An evaluation's work: which cells a model still needs, under which settings, in which work units.

Everything here decides *what* to score before any model runs, for the in-process `runner.evaluate`
and for the cluster's Ray Data items alike: the settings that, with the model, fix a cell's numbers
(and so its results key, `results.KEY`), the Abacus-capacity check (once per model and grid), the
cells a rerun still has to score, the packing of cells into work units of similar cost, and the
work items a pool of evaluators pulls (`work_items`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from abacus_ray import plugins
from abacus_ray.config import EvalConfig, ExperimentConfig
from abacus_ray.config.task import longest_digit_run
from abacus_ray.config.train import resolved_precision
from abacus_ray.evaluation.grids import Cell, Grid
from abacus_ray.evaluation.results import done_keys, key_of
from abacus_ray.model.checkpoint import (
    META_FILE,
    located,
    read_checkpoint_config,
    read_json,
    resolve_checkpoint,
)
from abacus_ray.model.memory import check_eval_fits, meta_model
from abacus_ray.storage import Location


@dataclass(frozen=True)
class Settings:
    """Everything besides the model that decides a cell's numbers (and so its results key)."""

    per_cell: int
    eval_seed: int
    engine: str
    recurrences: int
    require_eos: bool
    precision: str
    token_budget: int
    # results.SCORINGS: "exact" every answer token; "digits" hint symbols dropped
    scoring: str = "exact"

    def key_columns(self, model_id: str, cell: Cell) -> dict[str, Any]:
        """The results-key columns of `cell` (`results.KEY`): the one place they are assembled."""
        return {"model_id": model_id, "task": cell.task, "i": cell.i, "j": cell.j,
                "per_cell": self.per_cell, "eval_seed": self.eval_seed,
                "recurrences": self.recurrences, "require_eos": self.require_eos,
                "scoring": self.scoring}


def settings_for(cfg: ExperimentConfig, eval_cfg: EvalConfig, device_type: str, task: str, *,
                 samples: bool = False) -> Settings:
    """Resolve `eval_cfg` against a checkpoint's `ExperimentConfig` for cells of `task` on a device
    type.

    An index-hint model under the official rule is scored on its digits only (docs/fidelity.md,
    "Evaluation"), which needs the model's own output: the teacher-forced engine gives way to `kv`.
    """
    digits = cfg.task.index_hints != "none" and eval_cfg.hint_scoring == "official"
    decode = samples or digits  # predictions are needed
    engine = "kv" if decode and eval_cfg.engine == "teacher" else eval_cfg.engine
    return Settings(
        per_cell=eval_cfg.per_cell, eval_seed=eval_cfg.seed, engine=engine,
        recurrences=eval_cfg.recurrences or cfg.model.test_recurrences,
        require_eos=eval_cfg.sort_require_eos if task == "sort" else True,
        precision=resolved_precision(eval_cfg.precision, device_type, evaluation=True),
        token_budget=eval_cfg.token_budget,
        scoring="digits" if digits else "exact")


def cells_for(cfg: ExperimentConfig, grids: Sequence[Grid]) -> list[Cell]:
    """The unique cells of `grids` for a model of config `cfg`, in grid order, checked against its
    Abacus table (`check_capacity`): every path plans through here, so the check runs once per
    model."""
    seen: dict[Cell, None] = {}
    for g in grids:
        for c in g.cells(cfg.task.name):
            seen.setdefault(c, None)
    cells = list(seen)
    check_capacity(cfg, cells)
    return cells


def check_capacity(cfg: ExperimentConfig, cells: Sequence[Cell],
                   remedy: str = "drop the cell from the grid") -> None:
    """Fail before any work if a cell's numbers run past the model's Abacus table."""
    if not cfg.model.uses_abacus or not cells:
        return
    hints = cfg.task.index_hints
    worst = max(cells, key=lambda c: longest_digit_run(c.task, c.i, c.j, hints))
    need = longest_digit_run(worst.task, worst.i, worst.j, hints) + 1
    if need > cfg.model.abacus_table:
        raise ValueError(f"model.abacus_table: cell {worst.task} {worst.i}x{worst.j} needs {need} "
                         f"Abacus rows but the checkpoint's table has {cfg.model.abacus_table}; "
                         f"{remedy}")


def missing_cells(cfg: ExperimentConfig, model_id: str, cells: Sequence[Cell],
                  eval_cfg: EvalConfig, have: set[tuple], *, device_type: str = "cpu",
                  samples: bool = False) -> list[Cell]:
    """The cells whose results key (`results.KEY`) is not in `have`: what a rerun still has to
    score."""
    todo = []
    for c in cells:
        s = settings_for(cfg, eval_cfg, device_type, c.task, samples=samples)
        if key_of(s.key_columns(model_id, c)) not in have:
            todo.append(c)
    return todo


def cell_cost(cell: Cell, per_cell: int) -> float:
    """Rough teacher-forced tokens of a cell (prompt + answer + EOS) x problems, for packing and
    ETA."""
    i, j = cell.i, cell.j
    if cell.task == "sort":
        line = j * (i + 3) + 2 * j + 1
    elif cell.task == "mul":
        line = 2 * (i + j) + 3
    elif cell.task in plugins.TASKS:
        line = plugins.TASKS[cell.task].longest_line(i, j) + 1
    else:
        line = i + j + max(i, j) + 4
    return float(line * (min(per_cell, min(i, j)) if cell.task == "or" else per_cell))


def token_flops(cfg: ExperimentConfig, recurrences: int) -> tuple[float, float]:
    """(Forward FLOPs per token at line length 0, added per unit of line length) of `cfg`'s model
    run `recurrences` times: a forward's FLOPs per token are linear in the line length
    (attention)."""
    model = meta_model(cfg)  # shapes only, cached per architecture
    at_zero = model.flops_per_token(0, recurrences, grad_recurrences=0)
    return at_zero, model.flops_per_token(1, recurrences, grad_recurrences=0) - at_zero


def forward_flops(cells: Sequence[Cell], per_cell: int, flops: tuple[float, float]) -> float:
    """Forward FLOPs of scoring `cells` teacher-forced, given `token_flops`: what the cluster
    divides by an evaluator's speed to split items between its GPU and CPU pools."""
    at_zero, per_length = flops
    return sum(cell_cost(c, per_cell) * (at_zero + per_length * cell_cost(c, 1)) for c in cells)


def check_eval_memory(cfg: ExperimentConfig, cells: Sequence[Cell], eval_cfg: EvalConfig,
                      device: Any) -> None:
    """Refuse before scoring when the largest of `cells` cannot fit `device` (model/memory.py): its
    problems, their initial-state noise and the weights are held at once."""
    if not cells:
        return
    worst = max(cells, key=lambda c: cell_cost(c, eval_cfg.per_cell))
    length = int(cell_cost(worst, 1))
    check_eval_fits(cfg, device, rows=int(cell_cost(worst, eval_cfg.per_cell)) // length,
                    length=length, token_budget=eval_cfg.token_budget or 8192)


def unit_tokens(eval_cfg: EvalConfig, device_type: str) -> int:
    """Estimated tokens per work unit of `evaluate`: four token budgets, 16x more on CUDA, whose
    automatic batch budget is far larger, so a unit fills the device for a few batches."""
    return 4 * (eval_cfg.token_budget or 8192) * (16 if device_type == "cuda" else 1)


def work_units(cells: list[Cell], per_cell: int, budget: float,
               max_cells: int | None = None) -> Iterator[list[Cell]]:
    """Consecutive runs of at most `max_cells` cells of about `budget` estimated tokens (>= 1 cell
    each), never mixing tasks: the unit of work of `evaluate` and of the cluster's evaluator
    actors."""
    max_cells = max_cells or len(cells) or 1
    unit: list[Cell] = []
    total = 0.0
    for c in cells:
        cost = cell_cost(c, per_cell)
        if unit and (total + cost > budget or c.task != unit[-1].task or len(unit) >= max_cells):
            yield unit
            unit, total = [], 0.0
        unit.append(c)
        total += cost
    if unit:
        yield unit


# --- work items for a pool of evaluators (the Ray layer's Ray Data rows) --------------------------

ITEM_TOKENS = 2**18  # teacher-forced tokens per work item: seconds of work, small enough to balance
ITEM_CELLS = 64


@dataclass(frozen=True)
class Source:
    """A checkpoint to evaluate, with the ids that tie its rows to a sweep and a trial."""

    checkpoint: str
    run_id: str | None = None
    trial_id: str | None = None

    @property
    def location(self) -> Location:
        """The checkpoint (a local path or a URI, as a results row holds it), resolved."""
        return located(self.checkpoint)


@dataclass(frozen=True)
class WorkItems:
    """The work items of an evaluation: a checkpoint and a few seconds' worth of its missing cells
    each."""

    # checkpoint, task / i / j (typed lists of equal length), run_id, trial_id, cost
    items: list[dict[str, Any]]
    cells: int  # cells to score
    skipped: int  # cells already in the results


def work_items(sources: Sequence[Source], grids: Sequence[Grid], eval_cfg: EvalConfig,
               out_dir: Location) -> WorkItems:
    """Work items for the cells whose key is not in `out_dir` (a resolved results directory) yet;
    reads configs and ids, no weights; a checkpoint may be a URI (its two small JSON files are read
    from there).

    Runs before any cluster starts, so a bad grid or an overflowing Abacus table costs no cluster
    time."""
    have = done_keys(out_dir)
    items: list[dict[str, Any]] = []
    todo_total = skipped = 0
    for src in sources:
        path = resolve_checkpoint(src.location)
        cfg = read_checkpoint_config(path)
        model_id = read_json(path / META_FILE)["model_id"]
        cells = cells_for(cfg, grids)
        todo = missing_cells(cfg, model_id, cells, eval_cfg, have)
        skipped += len(cells) - len(todo)
        todo_total += len(todo)
        todo.sort(key=lambda c: (c.task, cell_cost(c, eval_cfg.per_cell)))
        flops = token_flops(cfg, eval_cfg.recurrences or cfg.model.test_recurrences)
        for unit in work_units(todo, eval_cfg.per_cell, ITEM_TOKENS, ITEM_CELLS):
            items.append({"checkpoint": str(path), "task": [c.task for c in unit],
                          "i": [c.i for c in unit], "j": [c.j for c in unit],
                          "run_id": src.run_id or "", "trial_id": src.trial_id or "",
                          "flops": forward_flops(unit, eval_cfg.per_cell, flops)})
    return WorkItems(items, todo_total, skipped)
