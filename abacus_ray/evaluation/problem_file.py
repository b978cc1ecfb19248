"""Scoring a file of problems, one a line, written the way people write them (`eval --problems`).

A researcher who scored a model on particular problems (an official eval set, a hand-picked list)
scores it here on exactly those: one problem a line in natural digit order and the task's own
syntax,

    add      123+4567           sub   900-45          addsub  either
    mul      12*34 (or 12x34)   or    0010+000001     sort    3705,640,65461

blank lines and lines starting with `#` skipped, an optional trailing `=` accepted, spaces around
the operators, commas and `=` ignored. Only ASCII is read: a digit of another script (Arabic-Indic,
full-width) is refused, and so is a space inside a number (`1 2+3` is not `12+3`). Each line becomes
the model's text format (reversed operands, index hints for an index-hint model, sorting labels from
the first label symbol on), and problems are grouped into the cells (task, i, j) they fall into, in
file order, so the same engines (`engine.run_cells`), the same per-cell noise and the same verdicts
as the grid path apply: a file holding a grid cell's problems in grid order reproduces that cell.

Bounds are checked before any model is loaded: the file's size, its line count and each operand's
length; a bad line is one error naming the file and its line number.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import torch

from abacus_ray import storage
from abacus_ray.config import EvalConfig, ExperimentConfig
from abacus_ray.config.task import TASKS
from abacus_ray.evaluation.engine import prepare_cell, run_cells
from abacus_ray.evaluation.errors import cell_errors
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.results import (
    PROBLEMS_DIR,
    config_columns,
    read_problems,
    write_cells,
    write_problems,
)
from abacus_ray.evaluation.runner import cell_columns, default_device
from abacus_ray.evaluation.work import check_capacity, settings_for
from abacus_ray.model.checkpoint import (
    META_FILE,
    load_checkpoint,
    read_checkpoint_config,
    read_json,
    resolve_checkpoint,
)
from abacus_ray.model.memory import check_eval_fits
from abacus_ray.tasks.arithmetic import int_from_text, reversed_answer
from abacus_ray.tasks.formats import Problem, hinted_problem
from abacus_ray.tasks.tokenizer import SORT_LABELS, get_tokenizer
from abacus_ray.text import shorten

MAX_FILE_BYTES = 16 << 20
MAX_LINES = 100_000
MAX_DIGITS = 1000  # an operand's digits: the official "googol" eval's longest numbers
MAX_LINE_CHARS = 4 * MAX_DIGITS
MAX_SORT_DIGITS = 30  # the paper's sorting grid
_ARITH = re.compile(r"([0-9]+)([+\-*x])([0-9]+)=?")  # ASCII digits only: \d also matches ٣ and ３
_BITS = re.compile(r"([01]+)\+([01]+)=?")
_LIST = re.compile(r"[0-9]+(,[0-9]+)*=?")
_AROUND_SYMBOLS = re.compile(r"\s*([+\-*x,=])\s*")


@dataclass(frozen=True)
class FileProblem:
    """One line of a problem file, parsed: where it was, its cell and its model-format problem."""

    line: int
    text: str
    cell: Cell
    problem: Problem
    answer: str  # the true answer in natural order


@dataclass(frozen=True)
class ProblemSet:
    path: Path
    label: str  # "<file name> sha256:<12 hex>", stored in every row
    problems: list[FileProblem]

    def cells(self) -> dict[Cell, list[FileProblem]]:
        """Problems grouped by cell, cells and problems in file order."""
        out: dict[Cell, list[FileProblem]] = {}
        for p in self.problems:
            out.setdefault(p.cell, []).append(p)
        return out


def _arith_task(model_task: str, op: str) -> str:
    task = {"+": "add", "-": "sub", "*": "mul", "x": "mul"}[op]
    if model_task == "addsub" and task in ("add", "sub"):
        return task
    if task != model_task:
        raise ValueError(f"operator {op!r} is not the model's task ({model_task})")
    return task


def parse_line(text: str, task: str, index_hints: str) -> tuple[Cell, Problem, str]:
    """(cell, model-format problem, natural answer) of one problem in natural syntax; ValueError if
    bad."""
    if task == "or":
        m = _BITS.fullmatch(text)
        if not m:
            raise ValueError("expected two bit strings, e.g. 0010+000001")
        u, v = m.group(1), m.group(2)
        _check_len(u, v, limit=MAX_DIGITS)
        width = max(len(u), len(v))
        w = "".join("1" if "1" in (a, b) else "0"
                    for a, b in zip(u.ljust(width, "0"), v.ljust(width, "0"), strict=True))
        return Cell("or", len(u), len(v)), Problem(f"{u}+{v}=", w), w
    if task == "sort":
        if not _LIST.fullmatch(text):
            raise ValueError("expected numbers separated by commas, e.g. 3705,640,65461")
        numbers = text.rstrip("=").split(",")
        _check_len(*numbers, limit=MAX_SORT_DIGITS)
        if len(numbers) > len(SORT_LABELS):
            raise ValueError(f"{len(numbers)} numbers; the model has only {len(SORT_LABELS)} "
                             "labels")
        labels = SORT_LABELS[: len(numbers)]
        # stable, as the generator
        order = sorted(range(len(numbers)), key=lambda e: int(numbers[e]))
        prompt = ",".join(f"{lab}:{n[::-1]}"
                          for lab, n in zip(labels, numbers, strict=True)) + "="
        natural = ",".join(numbers[e] for e in order)
        return (Cell("sort", max(map(len, numbers)), len(numbers)),
                Problem(prompt, ",".join(labels[e] for e in order)), natural)
    m = _ARITH.fullmatch(text)
    if not m:
        example = {"add": "123+4567", "sub": "900-45", "addsub": "123+4567 or 900-45",
                   "mul": "12*34"}[task]
        raise ValueError(f"expected two decimal operands and the task's operator, e.g. {example}")
    a, op, b = m.groups()
    _check_len(a, b, limit=MAX_DIGITS)
    cell_task = _arith_task(task, op)
    x, y = int_from_text(a), int_from_text(b)
    value = x + y if cell_task == "add" else x - y if cell_task == "sub" else x * y
    sym = "x" if cell_task == "mul" else op
    answer = reversed_answer(value)
    if index_hints != "none":
        # eval hints start at the first symbol
        problem = hinted_problem(a[::-1], sym, b[::-1], answer, 0)
    else:
        problem = Problem(f"{a[::-1]}{sym}{b[::-1]}=", answer)
    return Cell(cell_task, len(a), len(b)), problem, str(value)


def _check_len(*operands: str, limit: int) -> None:
    longest = max(map(len, operands))
    if longest > limit:
        raise ValueError(f"an operand of {longest} digits; at most {limit}")


def joined(text: str) -> str:
    """A stripped line with the spaces around its operators, commas and '=' removed; a character
    outside ASCII (a digit of another script, a full-width sign) or a space inside a number is
    refused."""
    foreign = next((c for c in text if not c.isascii()), None)
    if foreign is not None:
        raise ValueError(f"{foreign!r} (U+{ord(foreign):04X}) is not ASCII; "
                         "write numbers with the digits 0-9")
    text = _AROUND_SYMBOLS.sub(r"\1", text)
    if any(c.isspace() for c in text):
        raise ValueError("a space inside a number ('1 2+3' is not 12+3); "
                         "write each number without spaces")
    return text


def read_problem_file(path: str | Path, cfg: ExperimentConfig) -> ProblemSet:
    """Parse and bound a problem file for a model of config `cfg`; errors name the file and line
    (as an editor counts lines: '\\n' ends one)."""
    path = storage.local_path(path, "--problems", "a problem file")
    if cfg.task.name not in TASKS:
        raise ValueError(f"--problems: problem files hold the built-in tasks ({', '.join(TASKS)}); "
                         f"the model's task {cfg.task.name!r} is a plugin's: score it on a grid "
                         "(--grid, --cells, --diagonal)")
    if not path.is_file():
        raise storage.not_a_file(path, "no such problem file", "a problem file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{path}: {size} bytes; a problem file may hold at most {MAX_FILE_BYTES}")
    raw = path.read_bytes()
    try:
        lines = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if lines[-1] == "":  # the newline that ends the last line
        lines.pop()
    if len(lines) > MAX_LINES:
        raise ValueError(f"{path}: {len(lines)} lines; a problem file may hold at most {MAX_LINES}")
    problems = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if len(text) > MAX_LINE_CHARS:
            raise ValueError(f"{path}:{number}: {len(text)} characters; at most {MAX_LINE_CHARS}")
        try:
            cell, problem, answer = parse_line(joined(text), cfg.task.name, cfg.task.index_hints)
            check_capacity(cfg, [cell], "shorten its numbers or drop the line")
        except ValueError as e:
            shown = shorten(text, 40)
            raise ValueError(f"{path}:{number}: {shown!r}: {e}") from None
        problems.append(FileProblem(number, text, cell, problem, answer))
    if not problems:
        raise ValueError(f"{path}: holds no problems")
    label = f"{path.name} sha256:{hashlib.sha256(raw).hexdigest()[:12]}"
    return ProblemSet(path, label, problems)


def natural(task: str, model_text: str) -> str:
    """A model-format output in natural order: arithmetic digits un-reversed (hint symbols dropped,
    a trailing '-' moved to the front); other tasks as they are."""
    if task not in ("add", "sub", "mul"):
        return model_text
    kept = "".join(ch for ch in model_text if ch.isdigit() or ch == "-")
    return "-" + kept[:-1][::-1] if kept.endswith("-") else kept[::-1]


def score_problem_set(checkpoint, problems: ProblemSet, eval_cfg: EvalConfig, *,
                      run_id: str | None = None) -> tuple[list[dict], list[dict]]:
    """(cell rows, problem rows) for a loaded checkpoint; cells as the grid path scores them."""
    cfg, model = checkpoint.config, checkpoint.model
    device = next(model.parameters()).device
    groups = problems.cells()
    check_capacity(cfg, list(groups))
    tok = get_tokenizer(cfg.task.tokenizer_name)
    base = config_columns(cfg) | {"model_id": checkpoint.model_id, "run_id": run_id,
                                  "checkpoint": str(checkpoint.path), "device": device.type,
                                  "problems": problems.label}
    cell_rows, problem_rows = [], []
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for task in dict.fromkeys(c.task for c in groups):
        # predictions: a decoding engine
        s = settings_for(cfg, eval_cfg, device.type, task, samples=True)
        cells = [c for c in groups if c.task == task]
        prepared = [prepare_cell(c, [p.problem for p in groups[c]], tok, s.eval_seed, s.scoring)
                    for c in cells]
        outcomes = run_cells(model, prepared, engine=s.engine, recurrences=s.recurrences,
                             require_eos=s.require_eos, token_budget=s.token_budget or None,
                             precision=s.precision)
        for o in outcomes:
            errors = cell_errors(o)
            # none generated: never a grid key
            key = s.key_columns(checkpoint.model_id, o.cell) | {"per_cell": 0}
            cell_rows.append(base | key | cell_columns(o, errors, cfg, s.precision, now))
            for r, fp in enumerate(groups[o.cell]):
                problem_rows.append({
                    "model_id": checkpoint.model_id, "name": cfg.name, "run_id": run_id,
                    "problems": problems.label, "line": fp.line, "problem": fp.text,
                    "task": o.cell.task, "i": o.cell.i, "j": o.cell.j, "answer": fp.answer,
                    "prediction": natural(o.cell.task, o.predictions[r]),
                    "prompt": fp.problem.prompt, "target": fp.problem.answer,
                    "output": o.predictions[r], "stopped": o.stopped[r], "correct": o.correct[r],
                    "first_wrong": o.first_wrong[r], "error": errors.classes[r],
                    "engine": o.engine, "eval_seed": s.eval_seed, "recurrences": s.recurrences,
                    "scoring": s.scoring})
    problem_rows.sort(key=lambda row: row["line"])
    return cell_rows, problem_rows


def check_problems_memory(cfg: ExperimentConfig, problems: ProblemSet, eval_cfg: EvalConfig,
                          device) -> None:
    """Refuse before the weights are loaded when the file's problems cannot be scored at once on
    `device` (model/memory.py): each cell is padded to its longest line, and a task's cells are
    scored together."""
    groups = problems.cells()
    tokens = sum(len(ps) * max(len(p.problem.prompt) + len(p.problem.answer) + 1 for p in ps)
                 for ps in groups.values())
    rows = max(len(problems.problems), 1)
    check_eval_fits(cfg, device, rows=rows, length=-(-tokens // rows),
                    token_budget=eval_cfg.token_budget or 8192, key="--problems")


def evaluate_problem_file(checkpoint: storage.Location, problems_path: str | Path,
                          eval_cfg: EvalConfig, out_dir: storage.Location, *, device=None,
                          run_id: str | None = None) -> tuple[int, int, object]:
    """Score a problem file on one checkpoint into `out_dir`; returns (problems, correct, problem
    part), (0, 0, None) when this file was already scored on this model there.

    The file is read and bounded against the checkpoint's config before the weights are loaded. One
    results directory holds one problem file's results (their cell rows share per_cell = 0)."""
    path = resolve_checkpoint(checkpoint)
    problems = read_problem_file(problems_path, read_checkpoint_config(path))
    model_id = read_json(path / META_FILE).get("model_id")
    earlier = read_problems(out_dir) if storage.is_dir(out_dir / PROBLEMS_DIR) else None
    if earlier is not None and len(earlier):
        other = sorted(set(earlier["problems"]) - {problems.label})
        if other:
            raise ValueError(f"--out: {out_dir} holds the results of another problem file "
                             f"({other[0]}); use one results directory per problem file")
        if model_id in set(earlier["model_id"]):
            return 0, 0, None  # this file on this model is already scored
    device = torch.device(device) if device is not None else default_device()
    check_problems_memory(read_checkpoint_config(path), problems, eval_cfg, device)
    ckpt = load_checkpoint(path, map_location=device)
    cell_rows, problem_rows = score_problem_set(ckpt, problems, eval_cfg, run_id=run_id)
    # problems first: a cell row always has its problems
    part = write_problems(out_dir, problem_rows)
    write_cells(out_dir, cell_rows)
    return len(problem_rows), sum(r["correct"] for r in problem_rows), part
