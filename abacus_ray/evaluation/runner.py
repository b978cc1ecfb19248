"""Evaluate checkpoints on grids into a results directory; a rerun scores only the missing cells.

`score_cells` is the unit of work: a loaded checkpoint and a list of cells in, result rows out. The
cluster layer calls it from Ray Data actors; `evaluate` calls it in-process: it loads each model once,
skips the cells whose key is already in the results (`results.KEY`), scores the rest in work units of
similar length, and flushes a new Parquet part every `flush_every_s` seconds or `flush_every_cells`
cells, so a killed run loses at most that much work. Progress and ETA go to stderr.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import torch

from abacus_ray.evaluation.config import EvalConfig
from abacus_ray.evaluation.engine import PreparedCell, prepare_cell, resolved_precision, run_cells
from abacus_ray.evaluation.grids import Cell, Grid
from abacus_ray.evaluation.progress import Progress
from abacus_ray.evaluation.regions import region_of
from abacus_ray.evaluation.results import config_columns, done_keys, key_of, write_cells, write_samples


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


def settings_for(cfg, eval_cfg: EvalConfig, device: torch.device, task: str, *, samples: bool = False) -> Settings:
    """Resolve `eval_cfg` against a checkpoint's `ExperimentConfig` for cells of `task`."""
    engine = "kv" if samples and eval_cfg.engine == "teacher" else eval_cfg.engine  # samples need predictions
    return Settings(
        per_cell=eval_cfg.per_cell, eval_seed=eval_cfg.seed, engine=engine,
        recurrences=eval_cfg.recurrences or cfg.model.test_recurrences,
        require_eos=eval_cfg.sort_require_eos if task == "sort" else True,
        precision=resolved_precision(device, eval_cfg.precision), token_budget=eval_cfg.token_budget)


def longest_digit_run(task: str, i: int, j: int, index_hints: str = "none") -> int:
    """Longest digit run of any problem in cell (i, j): the Abacus rows it needs (at k = 0, plus row 0)."""
    if index_hints != "none":
        return 1
    return {"add": max(i, j) + 1, "sub": max(i, j), "mul": i + j, "or": max(i, j), "sort": i}[task]


def check_capacity(cfg, cells: Sequence[Cell]) -> None:
    """Fail before any work if a cell's numbers run past the model's Abacus table."""
    if not cfg.model.uses_abacus or not cells:
        return
    worst = max(cells, key=lambda c: longest_digit_run(c.task, c.i, c.j, cfg.task.index_hints))
    need = longest_digit_run(worst.task, worst.i, worst.j, cfg.task.index_hints) + 1
    if need > cfg.model.abacus_table:
        raise ValueError(f"model.abacus_table: cell {worst.task} {worst.i}x{worst.j} needs {need} Abacus rows but the "
                         f"checkpoint's table has {cfg.model.abacus_table}; drop the cell from the grid")


def problems_for(cfg, cell: Cell, per_cell: int, eval_seed: int) -> list:
    """The cell's eval problems in the checkpoint's format variant (index hints; never random pads)."""
    from abacus_ray.tasks.evalsets import eval_problems

    variant: dict[str, Any] = {}
    if cfg.task.index_hints != "none":
        variant["index_hints"] = cfg.task.index_hints
    return eval_problems(cell.task, cell.i, cell.j, per_cell, eval_seed, **variant)


def prepare(cfg, cells: Sequence[Cell], per_cell: int, eval_seed: int) -> list[PreparedCell]:
    from abacus_ray.tasks.tokenizer import get_tokenizer

    tok = get_tokenizer(cfg.task.tokenizer_name)
    return [prepare_cell(c, problems_for(cfg, c, per_cell, eval_seed), tok, eval_seed) for c in cells]


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return device.type


def score_cells(checkpoint, cells: Sequence[Cell], eval_cfg: EvalConfig, *, samples: bool = False,
                run_id: str | None = None, trial_id: str | None = None) -> tuple[list[dict], list[dict]]:
    """Score `cells` on a loaded checkpoint (`training.checkpoint.Checkpoint`); returns (cell rows, sample rows).

    Sample rows are only produced with `samples=True`. Cells of several tasks (an addsub model) are fine.
    """
    cfg, model = checkpoint.config, checkpoint.model
    device = next(model.parameters()).device
    check_capacity(cfg, cells)
    base = config_columns(cfg) | {"model_id": checkpoint.model_id, "run_id": run_id, "trial_id": trial_id,
                                  "checkpoint": str(getattr(checkpoint, "path", "")) or None,
                                  "device": _device_name(device)}
    rows: list[dict] = []
    sample_rows: list[dict] = []
    by_task: dict[str, list[Cell]] = {}
    for c in cells:
        by_task.setdefault(c.task, []).append(c)
    for task, task_cells in by_task.items():
        s = settings_for(cfg, eval_cfg, device, task, samples=samples)
        prepared = prepare(cfg, task_cells, s.per_cell, s.eval_seed)
        outcomes = run_cells(model, prepared, engine=s.engine, recurrences=s.recurrences, require_eos=s.require_eos,
                             token_budget=s.token_budget or None, precision=s.precision)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        for o in outcomes:
            key_cols = {"task": o.cell.task, "i": o.cell.i, "j": o.cell.j, "per_cell": s.per_cell,
                        "eval_seed": s.eval_seed, "recurrences": s.recurrences, "require_eos": s.require_eos}
            rows.append(base | key_cols | {
                "region": region_of(o.cell.task, o.cell.i, o.cell.j, cfg.task.train_max_len, cfg.task.train_max_array),
                "n_train": cfg.task.train_max_len, "n": o.n, "n_correct": o.n_correct,
                "accuracy": o.n_correct / o.n, "n_first_correct": sum(o.first_correct),
                "engine": o.engine, "precision": s.precision, "seconds": o.seconds, "evaluated_at": now})
            if samples:
                p = o.prepared
                for r in range(o.n):
                    sample_rows.append({"model_id": checkpoint.model_id, **key_cols, "index": r,
                                        "prompt": p.prompts_text[r], "target": p.answers_text[r],
                                        "prediction": o.predictions[r], "stopped": o.stopped[r],
                                        "correct": o.correct[r], "first_wrong": o.first_wrong[r],
                                        "first_correct": o.first_correct[r], "engine": o.engine})
    return rows, sample_rows


def cell_cost(cell: Cell, per_cell: int) -> float:
    """Rough teacher-forced tokens of a cell (prompt + answer + EOS) x problems, for packing and ETA."""
    i, j = cell.i, cell.j
    if cell.task == "sort":
        line = j * (i + 3) + 2 * j + 1
    elif cell.task == "mul":
        line = 2 * (i + j) + 3
    else:
        line = i + j + max(i, j) + 4
    return float(line * (min(per_cell, min(i, j)) if cell.task == "or" else per_cell))


@dataclass
class EvalReport:
    """What `evaluate` did, per checkpoint."""

    evaluated: dict[str, int] = field(default_factory=dict)  # model_id -> cells scored now
    skipped: dict[str, int] = field(default_factory=dict)  # model_id -> cells already present
    parts: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def cells_for(cfg, grids: Sequence[Grid]) -> list[Cell]:
    """The unique cells of `grids` for a model of config `cfg`, in grid order."""
    seen: dict[Cell, None] = {}
    for g in grids:
        for c in g.cells(cfg.task.name):
            seen.setdefault(c, None)
    return list(seen)


def missing_cells(cfg, model_id: str, cells: Sequence[Cell], eval_cfg: EvalConfig, have: set[tuple], *,
                  device: torch.device | None = None, samples: bool = False) -> list[Cell]:
    """The cells whose results key (`results.KEY`) is not in `have`: what a rerun still has to score."""
    device = device if device is not None else torch.device("cpu")
    todo = []
    for c in cells:
        s = settings_for(cfg, eval_cfg, device, c.task, samples=samples)
        key = key_of({"model_id": model_id, "task": c.task, "i": c.i, "j": c.j, "per_cell": s.per_cell,
                      "eval_seed": s.eval_seed, "recurrences": s.recurrences, "require_eos": s.require_eos})
        if key not in have:
            todo.append(c)
    return todo


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def evaluate(checkpoints: Sequence[str | Path], grids: Grid | Sequence[Grid], eval_cfg: EvalConfig,
             out_dir: str | Path, *, device: str | torch.device | None = None, samples: bool = False,
             progress: bool = True, run_id: str | None = None, trial_id: str | None = None,
             flush_every_s: float = 10.0, flush_every_cells: int = 200, stream: TextIO | None = None) -> EvalReport:
    """Evaluate every checkpoint on `grids` into `out_dir`, skipping cells already there."""
    from abacus_ray.training.checkpoint import load_checkpoint

    if isinstance(grids, Grid):
        grids = [grids]
    if not checkpoints:
        raise ValueError("checkpoints: give at least one checkpoint directory")
    if not flush_every_s > 0:  # NaN too
        raise ValueError(f"flush_every_s: must be > 0, got {flush_every_s}")
    if flush_every_cells < 1:
        raise ValueError(f"flush_every_cells: must be >= 1, got {flush_every_cells}")
    device = torch.device(device) if device is not None else default_device()
    out_dir = Path(out_dir)
    stream = stream or sys.stderr
    if len(checkpoints) > 1:  # a bad checkpoint anywhere is refused before the first one's rows are written
        for path in checkpoints:
            cfg = load_checkpoint(path, map_location="cpu").config
            check_capacity(cfg, cells_for(cfg, grids))
    report = EvalReport()
    t_start = time.monotonic()
    for n_ckpt, path in enumerate(checkpoints, 1):
        ckpt = load_checkpoint(path, map_location=device)
        cfg = ckpt.config
        cells = cells_for(cfg, grids)
        check_capacity(cfg, cells)
        have = done_keys(out_dir)
        todo = missing_cells(cfg, ckpt.model_id, cells, eval_cfg, have, device=device, samples=samples)
        report.skipped[ckpt.model_id] = len(cells) - len(todo)
        report.evaluated.setdefault(ckpt.model_id, 0)
        if not todo:
            if progress:
                stream.write(f"[{n_ckpt}/{len(checkpoints)}] {ckpt.model_id[:12]}: all {len(cells)} cells present\n")
            continue
        todo.sort(key=lambda c: (c.task, cell_cost(c, eval_cfg.per_cell)))
        bar = Progress(len(todo), sum(cell_cost(c, eval_cfg.per_cell) for c in todo),
                       f"[{n_ckpt}/{len(checkpoints)}] {ckpt.model_id[:12]}", stream=stream, enabled=progress)
        pending, pending_samples = [], []
        last_flush = time.monotonic()
        for unit in work_units(todo, eval_cfg.per_cell, unit_tokens(eval_cfg, device), flush_every_cells):
            rows, srows = score_cells(ckpt, unit, eval_cfg, samples=samples, run_id=run_id, trial_id=trial_id)
            pending.extend(rows)
            pending_samples.extend(srows)
            bar.update(len(unit), sum(cell_cost(c, eval_cfg.per_cell) for c in unit))
            if time.monotonic() - last_flush >= flush_every_s or len(pending) >= flush_every_cells:
                report.parts.extend(_flush(out_dir, pending, pending_samples))
                report.evaluated[ckpt.model_id] += len(pending)
                pending, pending_samples = [], []
                last_flush = time.monotonic()
        report.parts.extend(_flush(out_dir, pending, pending_samples))
        report.evaluated[ckpt.model_id] += len(pending)
        bar.close()
    report.seconds = time.monotonic() - t_start
    return report


def unit_tokens(eval_cfg: EvalConfig, device: torch.device) -> int:
    """Estimated tokens per work unit of `evaluate`: four token budgets, 16x more on CUDA, whose
    automatic batch budget is far larger, so a unit fills the device for a few batches."""
    return 4 * (eval_cfg.token_budget or 8192) * (16 if device.type == "cuda" else 1)


def work_units(cells: list[Cell], per_cell: int, budget: float, max_cells: int | None = None):
    """Consecutive runs of at most `max_cells` cells of about `budget` estimated tokens (>= 1 cell each),
    never mixing tasks: the unit of work of `evaluate` and of the cluster's evaluator actors."""
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


_units = work_units  # older name, still imported by abacus_ray.cluster.grid_eval


def _flush(out_dir: Path, rows: list[dict], sample_rows: list[dict]) -> list[Path]:
    """Samples first, then cells: a cell whose row is present always has its samples."""
    parts = []
    p = write_samples(out_dir, sample_rows)
    if p is not None:
        parts.append(p)
    p = write_cells(out_dir, rows)
    if p is not None:
        parts.append(p)
    return parts
