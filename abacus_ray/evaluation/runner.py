"""Scoring checkpoints on grids into a results directory; a rerun scores only the missing cells.

`score_cells` is the unit of work: a loaded checkpoint and a list of cells in, result rows out. The
cluster layer calls it from Ray Data actors; `evaluate` calls it in-process: it loads each model
once, scores the cells `work` finds missing (their key, `results.KEY`, is not in the results yet)
in work units of similar length, and flushes a new Parquet part every `flush_every_s` seconds or
`flush_every_cells` cells, so a killed run loses at most that much work. Progress and ETA go to
stderr.
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

from abacus_ray.config import EvalConfig, ExperimentConfig
from abacus_ray.evaluation.engine import PreparedCell, prepare_cell, run_cells
from abacus_ray.evaluation.errors import cell_errors
from abacus_ray.evaluation.grids import Cell, Grid
from abacus_ray.evaluation.progress import Progress
from abacus_ray.evaluation.regions import region_of
from abacus_ray.evaluation.results import (
    KeyIndex,
    config_columns,
    key_of,
    write_cells,
    write_samples,
)
from abacus_ray.evaluation.work import (
    cell_cost,
    cells_for,
    check_eval_memory,
    missing_cells,
    settings_for,
    unit_tokens,
    work_units,
)
from abacus_ray.model.checkpoint import Checkpoint, load_checkpoint
from abacus_ray.storage import Location
from abacus_ray.tasks.evalsets import eval_problems
from abacus_ray.tasks.tokenizer import get_tokenizer


def problems_for(cfg: ExperimentConfig, cell: Cell, per_cell: int, eval_seed: int) -> list:
    """The cell's eval problems in the checkpoint's format variant (index hints, never random
    padding)."""
    variant: dict[str, Any] = {}
    if cfg.task.index_hints != "none":
        variant["index_hints"] = cfg.task.index_hints
    return eval_problems(cell.task, cell.i, cell.j, per_cell, eval_seed, **variant)


def prepare(cfg: ExperimentConfig, cells: Sequence[Cell], per_cell: int, eval_seed: int,
            scoring: str = "exact") -> list[PreparedCell]:
    tok = get_tokenizer(cfg.task.tokenizer_name)
    return [prepare_cell(c, problems_for(cfg, c, per_cell, eval_seed), tok, eval_seed, scoring)
            for c in cells]


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return device.type


def score_cells(checkpoint: Checkpoint, cells: Sequence[Cell], eval_cfg: EvalConfig, *,
                samples: bool = False, run_id: str | None = None,
                trial_id: str | None = None) -> tuple[list[dict], list[dict]]:
    """Score planned `cells` (`work.cells_for`) on a loaded checkpoint; returns (cell rows, sample
    rows).

    Sample rows are only produced with `samples=True`. Cells of several tasks (an addsub model) are
    fine.
    """
    cfg, model = checkpoint.config, checkpoint.model
    device = next(model.parameters()).device
    source = (getattr(checkpoint, "source", "") or str(getattr(checkpoint, "path", ""))
              or None)
    base = config_columns(cfg) | {"model_id": checkpoint.model_id, "run_id": run_id,
                                  "trial_id": trial_id, "checkpoint": source,
                                  "device": _device_name(device)}
    rows: list[dict] = []
    sample_rows: list[dict] = []
    by_task: dict[str, list[Cell]] = {}
    for c in cells:
        by_task.setdefault(c.task, []).append(c)
    for task, task_cells in by_task.items():
        s = settings_for(cfg, eval_cfg, device.type, task, samples=samples)
        check_eval_memory(cfg, task_cells, eval_cfg, device)
        prepared = prepare(cfg, task_cells, s.per_cell, s.eval_seed, s.scoring)
        outcomes = run_cells(model, prepared, engine=s.engine, recurrences=s.recurrences,
                             require_eos=s.require_eos, token_budget=s.token_budget or None,
                             precision=s.precision)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        for o in outcomes:
            key_cols = s.key_columns(checkpoint.model_id, o.cell)
            errors = cell_errors(o)
            rows.append(base | key_cols | cell_columns(o, errors, cfg, s.precision, now))
            if samples:
                p = o.prepared
                for r in range(o.n):
                    sample_rows.append({**key_cols, "index": r,
                                        "prompt": p.prompts_text[r], "target": p.answers_text[r],
                                        "prediction": o.predictions[r], "stopped": o.stopped[r],
                                        "correct": o.correct[r], "first_wrong": o.first_wrong[r],
                                        "first_correct": o.first_correct[r],
                                        "error": errors.classes[r], "engine": o.engine})
    return rows, sample_rows


@dataclass
class EvalReport:
    """What `evaluate` did, per checkpoint."""

    evaluated: dict[str, int] = field(default_factory=dict)  # model_id -> cells it scored
    skipped: dict[str, int] = field(default_factory=dict)  # model_id -> cells already present
    parts: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def cell_columns(o, errors, cfg: ExperimentConfig, precision: str, now: str) -> dict[str, Any]:
    """A scored cell's result columns beside its key: region, counts, accuracy, errors, timing."""
    return errors.columns() | {
        "region": region_of(o.cell.task, o.cell.i, o.cell.j, cfg.task.train_max_len,
                            cfg.task.train_max_array),
        "n_train": cfg.task.train_max_len, "n": o.n, "n_correct": o.n_correct,
        "accuracy": o.n_correct / o.n, "n_first_correct": sum(o.first_correct),
        "engine": o.engine, "precision": precision, "seconds": o.seconds, "evaluated_at": now}


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def evaluate(checkpoints: Sequence[Location], grids: Grid | Sequence[Grid], eval_cfg: EvalConfig,
             out_dir: Location, *, device: str | torch.device | None = None,
             samples: bool = False, progress: bool = True, run_id: str | None = None,
             trial_id: str | None = None, flush_every_s: float = 10.0,
             flush_every_cells: int = 200, stream: TextIO | None = None) -> EvalReport:
    """Evaluate every checkpoint on `grids` into `out_dir`, skipping cells already there."""
    if isinstance(grids, Grid):
        grids = [grids]
    if not checkpoints:
        raise ValueError("checkpoints: give at least one checkpoint directory")
    if not flush_every_s > 0:  # NaN too
        raise ValueError(f"flush_every_s: must be > 0, got {flush_every_s}")
    if flush_every_cells < 1:
        raise ValueError(f"flush_every_cells: must be >= 1, got {flush_every_cells}")
    device = torch.device(device) if device is not None else default_device()
    # a local path or a URI; refreshed before every write (another writer's keys)
    index = KeyIndex(out_dir)
    stream = stream or sys.stderr
    planned: dict[int, list[Cell]] = {}
    # a bad checkpoint anywhere is refused before the first one's rows are written
    if len(checkpoints) > 1:
        for n, path in enumerate(checkpoints):
            cfg = load_checkpoint(path, map_location="cpu").config
            planned[n] = cells_for(cfg, grids)
            check_eval_memory(cfg, planned[n], eval_cfg, device)
    report = EvalReport()
    t_start = time.monotonic()
    for n_ckpt, path in enumerate(checkpoints, 1):
        ckpt = load_checkpoint(path, map_location=device)
        cells = planned[n_ckpt - 1] if planned else cells_for(ckpt.config, grids)
        check_eval_memory(ckpt.config, cells, eval_cfg, device)  # before any row is written
        todo = missing_cells(ckpt.config, ckpt.model_id, cells, eval_cfg, index.refresh(),
                             device_type=device.type, samples=samples)
        report.skipped[ckpt.model_id] = len(cells) - len(todo)
        report.evaluated.setdefault(ckpt.model_id, 0)
        if not todo:
            if progress:
                stream.write(f"[{n_ckpt}/{len(checkpoints)}] {ckpt.model_id[:12]}: "
                             f"all {len(cells)} cells present\n")
            continue
        todo.sort(key=lambda c: (c.task, cell_cost(c, eval_cfg.per_cell)))
        bar = Progress(len(todo), sum(cell_cost(c, eval_cfg.per_cell) for c in todo),
                       f"[{n_ckpt}/{len(checkpoints)}] {ckpt.model_id[:12]}", stream=stream,
                       enabled=progress)
        pending, pending_samples = [], []
        last_flush = time.monotonic()
        units = work_units(todo, eval_cfg.per_cell, unit_tokens(eval_cfg, device.type),
                           flush_every_cells)
        for unit in units:
            cost = sum(cell_cost(c, eval_cfg.per_cell) for c in unit)
            # another writer (a second `eval` on this RESULTS) may have scored some of these since
            unit = missing_cells(ckpt.config, ckpt.model_id, unit, eval_cfg, index.refresh(),
                                 device_type=device.type, samples=samples)
            if unit:
                rows, srows = score_cells(ckpt, unit, eval_cfg, samples=samples, run_id=run_id,
                                          trial_id=trial_id)
                pending.extend(rows)
                pending_samples.extend(srows)
            bar.update(len(unit), cost)
            if time.monotonic() - last_flush >= flush_every_s or len(pending) >= flush_every_cells:
                report.evaluated[ckpt.model_id] += _flush(index, pending, pending_samples,
                                                          report.parts)
                pending, pending_samples = [], []
                last_flush = time.monotonic()
        report.evaluated[ckpt.model_id] += _flush(index, pending, pending_samples, report.parts)
        bar.close()
    report.seconds = time.monotonic() - t_start
    return report


def _flush(index: KeyIndex, rows: list[dict], sample_rows: list[dict], parts: list) -> int:
    """Write the rows whose key no other writer has written meanwhile; returns how many. Samples
    first, then cells: a cell whose row is present always has its samples."""
    rows = index.fresh(rows)
    keys = {key_of(r) for r in rows}
    sample_rows = [r for r in sample_rows if key_of(r) in keys]
    samples_part = write_samples(index.loc, sample_rows)
    part = write_cells(index.loc, rows)
    parts.extend(p for p in (samples_part, part) if p is not None)
    if part is not None:
        index.wrote(part, keys)
    return len(rows)
