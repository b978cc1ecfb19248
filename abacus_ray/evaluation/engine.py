"""The exact-match engine: scores many cells of one model with one of three interchangeable engines.

* `teacher` (default): one forward over prompt + answer + EOS per problem (`teacher_forcing`). Each
  row is padded to its own cell's longest row; rows of equal padded length, from any cells, share
  batches of at most `token_budget` tokens (rows x padded length), and long cells are split. A row's
  padded length is thus a function of its cell alone: the kernels' summation order depends on it
  (a longer padding moves logits by an ulp or so), so this keeps every row's logits, and so a
  cell's numbers, the same whichever cells share the call (a rerun that scores only the missing
  cells packs them differently).
* `kv`: greedy decoding with a KV cache (`decoding.greedy_kv`); rows of all cells are grouped by
  prompt length (no attention padding) and chunked by the same budget. Produces predictions.
* `naive`: greedy decoding with a full forward per token, the official loop; baseline and oracle.

All three see the same per-cell noise (`noise`), so their per-problem verdicts agree; the tests
check this on every task and position scheme. Each cell's decoders may emit up to `decode_limit`
tokens: the answer field + EOS + 2 spare tokens (so an over-long answer is visible in the samples),
and twice the answer field for sorting, as the official sorting eval does
(docs/official-code.md §7.6). Index hints scored the official way (`scoring="digits"`,
docs/fidelity.md), which only the decoding engines can do, get twice the *unhinted* answer field
(digits + EOS), as the official evaluation generates for them before it drops the hint symbols and
compares; a correctly hinted answer (2 d + 1 tokens) fits.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from abacus_ray.config.evaluation import ENGINES
from abacus_ray.evaluation.decoding import greedy_kv, greedy_naive, greedy_per_recurrence, match
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.noise import cell_noise, gather_noise
from abacus_ray.evaluation.teacher_forcing import (  # noqa: F401 (re-exported)
    score_teacher_forced,
    teacher_forced,
)
from abacus_ray.model.precision import resolve_precision
from abacus_ray.seeds import cell_seed
from abacus_ray.tasks.tokenizer import PAD

SPARE_TOKENS = 2
SPECIAL_CHAR = "\ufffd"  # how UNK/BOS print in predictions


@dataclass
class PreparedCell:
    """A cell's problems, tokenized, with what every engine needs to treat it identically."""

    cell: Cell
    prompts_text: list[str]
    answers_text: list[str]
    prompts: list[list[int]]
    targets: list[list[int]]  # answer ids + EOS
    max_new: int  # decoding limit (tokens) for every row of the cell
    noise_len: int  # positions covered by the cell's noise: longest prompt + max_new
    seed: int
    tokenizer: object = field(repr=False, default=None)
    scoring: str = "exact"  # results.SCORINGS

    @property
    def drop_above(self) -> int | None:
        """Ids above this are deleted from outputs and targets before comparing ("digits"
        scoring)."""
        return self.tokenizer.equals_id if self.scoring == "digits" else None

    @property
    def n(self) -> int:
        return len(self.prompts)

    def tokens(self) -> int:
        """Teacher-forced tokens: the cost proxy used to split a batch's time among its cells."""
        return sum(len(p) + len(t) for p, t in zip(self.prompts, self.targets, strict=True))


@dataclass
class CellOutcome:
    """Per-problem verdicts of one cell (predictions only from the decoding engines)."""

    cell: Cell
    engine: str
    correct: list[bool]
    first_wrong: list[int]
    first_correct: list[bool]
    # the model's token at first_wrong; -1 if correct
    wrong_tokens: list[int] = field(default_factory=list)
    seconds: float = 0.0
    predictions: list[str] | None = None
    stopped: list[bool] | None = None
    prepared: PreparedCell | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return len(self.correct)

    @property
    def n_correct(self) -> int:
        return sum(self.correct)


def decode_limit(task: str, longest_answer: int, scoring: str = "exact") -> int:
    """Tokens a decoder may emit for a cell whose longest answer has `longest_answer` tokens (under
    the "digits" scoring: tokens other than hint symbols, the official eval's unhinted answer
    field)."""
    field_width = longest_answer + 1  # + EOS
    return 2 * field_width if task == "sort" or scoring == "digits" else field_width + SPARE_TOKENS


def prepare_cell(cell: Cell, problems: Sequence, tokenizer, eval_seed: int,
                 scoring: str = "exact") -> PreparedCell:
    """Tokenize a cell's `Problem`s (prompt, answer) and fix its decoding limit and noise seed."""
    if not problems:
        raise ValueError(f"cell {cell.task} {cell.i}x{cell.j}: has no problems")
    prompts = [tokenizer.encode(p.prompt) for p in problems]
    targets = [tokenizer.encode(p.answer, eos=True) for p in problems]
    longest = max(len(t) for t in targets) - 1
    # the official limit counts the answer without its hints (docs/fidelity.md)
    if scoring == "digits":
        longest = max(sum(1 for x in t[:-1] if x <= tokenizer.equals_id) for t in targets)
    max_new = decode_limit(cell.task, longest, scoring)
    return PreparedCell(cell, [p.prompt for p in problems], [p.answer for p in problems], prompts,
                        targets, max_new, max(len(p) for p in prompts) + max_new,
                        cell_seed(eval_seed, cell.task, cell.i, cell.j), tokenizer, scoring)


def auto_token_budget(model, device: torch.device) -> int:
    """Tokens per batch (rows x padded length): fixed on CPU, sized to free memory on CUDA.

    The CUDA estimate charges each token its per-layer activations, a 512-key attention row per
    head, the noise and logits, and its KV-cache entries for every layer application, then uses
    half of the free memory.
    """
    if device.type != "cuda":
        return 8192
    cfg = model.cfg
    per_token = 4 * (16 * cfg.hidden + 2 * cfg.intermediate + 2 * cfg.heads * 512
                     + 2 * model.vocab_size)
    per_token += 2 * 2 * cfg.hidden * cfg.layers * cfg.test_recurrences * 2
    free, _total = torch.cuda.mem_get_info(device)
    return int(max(4096, min(1 << 21, free * 0.5 // per_token)))


def _noise_for(prepared: Sequence[PreparedCell], model,
               device: torch.device) -> list[Tensor | None]:
    return [cell_noise(model.cfg, c.seed, c.n, c.noise_len, device) for c in prepared]


def _chunks(rows: list, cost_len, budget: int):
    """Consecutive chunks of `rows` with len(chunk) * max(cost_len) <= budget (at least one row
    each)."""
    chunk: list = []
    longest = 0
    for row in rows:
        n = cost_len(row)
        if chunk and (len(chunk) + 1) * max(longest, n) > budget:
            yield chunk
            chunk, longest = [], 0
        chunk.append(row)
        longest = max(longest, n)
    if chunk:
        yield chunk


def _model_device(model) -> torch.device:
    return next(model.parameters()).device


class _Verdicts:
    """Per-problem results of a `run_cells` call, filled batch by batch, plus each cell's share of
    time."""

    def __init__(self, prepared: Sequence[PreparedCell], engine: str) -> None:
        self.prepared, self.engine = prepared, engine
        self.correct = [[False] * c.n for c in prepared]
        self.first_wrong = [[-1] * c.n for c in prepared]
        self.first_ok = [[False] * c.n for c in prepared]
        self.wrong_token = [[-1] * c.n for c in prepared]
        decoded = engine != "teacher"
        self.preds = [[""] * c.n for c in prepared] if decoded else None
        self.stopped = [[False] * c.n for c in prepared] if decoded else None
        self.seconds = [0.0] * len(prepared)

    def set(self, c: int, r: int, correct: bool, first_wrong: int, first_ok: bool,
            wrong_token: int) -> None:
        self.correct[c][r], self.first_wrong[c][r] = correct, first_wrong
        self.first_ok[c][r], self.wrong_token[c][r] = first_ok, wrong_token

    def charge(self, rows: list[tuple[int, int]], elapsed: float, cost) -> None:
        """Split a batch's wall time among its cells in proportion to their rows' `cost(c, r)`."""
        weights: dict[int, float] = defaultdict(float)
        for c, r in rows:
            weights[c] += cost(c, r)
        total = sum(weights.values()) or 1.0
        for c, w in weights.items():
            self.seconds[c] += elapsed * w / total

    def outcomes(self) -> list[CellOutcome]:
        return [CellOutcome(p.cell, self.engine, self.correct[c], self.first_wrong[c],
                            self.first_ok[c], self.wrong_token[c], self.seconds[c],
                            None if self.preds is None else self.preds[c],
                            None if self.stopped is None else self.stopped[c], p)
                for c, p in enumerate(self.prepared)]


def _row_length(prepared: Sequence[PreparedCell], c: int, r: int) -> int:
    """Row `r` of cell `c` teacher-forced: its prompt, answer and EOS."""
    return len(prepared[c].prompts[r]) + len(prepared[c].targets[r])


def teacher_batches(prepared: Sequence[PreparedCell],
                    budget: int) -> Iterator[tuple[list[tuple[int, int]], int]]:
    """(Rows (cell, row), padded length) of the teacher-forced batches: every row padded to its own
    cell's longest prompt + answer + EOS, rows of one padded length chunked by `budget` tokens."""
    length = functools.partial(_row_length, prepared)
    groups: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for c, cell in enumerate(prepared):
        groups[max(length(c, r) for r in range(cell.n))].extend((c, r) for r in range(cell.n))
    for s in sorted(groups):
        for chunk in _chunks(groups[s], lambda row, s=s: s, budget):
            yield chunk, s


def _score_teacher(model, prepared, noises, out: _Verdicts, *, budget, recurrences, require_eos,
                   device) -> None:
    """Rows of all cells in batches of one padded length each (`teacher_batches`)."""
    length = functools.partial(_row_length, prepared)
    for chunk, s in teacher_batches(prepared, budget):
        t0 = time.perf_counter()
        ids = torch.full((len(chunk), s), PAD, dtype=torch.long)
        mask = torch.zeros((len(chunk), s), dtype=torch.bool)
        for b, (c, r) in enumerate(chunk):
            p, t = prepared[c].prompts[r], prepared[c].targets[r]
            ids[b, :len(p) + len(t)] = torch.tensor(p + t)
            mask[b, len(p):len(p) + len(t)] = True
        noise = gather_noise(noises, chunk, s, model.cfg.hidden, device)
        res = teacher_forced(model, ids.to(device), mask.to(device), recurrences=recurrences,
                             noise=noise, require_eos=require_eos)
        ok, fw, fc = res.correct.tolist(), res.first_wrong.tolist(), res.first_correct.tolist()
        wt = res.wrong_token.tolist()
        for b, (c, r) in enumerate(chunk):
            out.set(c, r, ok[b], fw[b], fc[b], wt[b])
        out.charge(chunk, time.perf_counter() - t0, length)


def _score_decoded(model, prepared, noises, out: _Verdicts, *, decode, budget, recurrences,
                   require_eos, device) -> None:
    """Rows of all cells grouped by prompt length (no attention padding), chunked by the budget."""
    groups: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for c, cell in enumerate(prepared):
        for r, p in enumerate(cell.prompts):
            groups[len(p)].append((c, r))
    for p_len in sorted(groups):
        def cost(c: int, r: int, p_len: int = p_len) -> int:
            return p_len + prepared[c].max_new

        for chunk in _chunks(groups[p_len], lambda row: cost(*row), budget):
            t0 = time.perf_counter()
            max_new = max(prepared[c].max_new for c, _ in chunk)
            ids = torch.tensor([prepared[c].prompts[r] for c, r in chunk], dtype=torch.long,
                               device=device)
            noise = gather_noise(noises, chunk, p_len + max_new, model.cfg.hidden, device)
            gen = decode(model, ids, max_new, recurrences=recurrences, noise=noise)
            m = match(gen.cpu(), [prepared[c].targets[r] for c, r in chunk],
                      [prepared[c].max_new for c, _ in chunk], require_eos=require_eos,
                      drop_above=prepared[0].drop_above)
            for b, (c, r) in enumerate(chunk):
                out.set(c, r, m.correct[b], m.first_wrong[b], m.first_correct[b], m.wrong_token[b])
                out.preds[c][r] = render(prepared[c].tokenizer, m.predictions[b])
                out.stopped[c][r] = m.stopped[b]
            out.charge(chunk, time.perf_counter() - t0, cost)


def run_cells(model, prepared: Sequence[PreparedCell], *, engine: str = "teacher",
              recurrences: int | None = None, require_eos: bool = True,
              token_budget: int | None = None, precision: str = "auto") -> list[CellOutcome]:
    """Score `prepared` cells on `model` (eval mode is set here) with `engine`; one outcome per
    cell.

    A cell's `seconds` is the wall time of the batches it was in, split among their cells by token
    count.
    """
    if engine not in ENGINES:
        raise ValueError(f"eval.engine: {engine!r} is not one of {', '.join(ENGINES)}")
    if not prepared:
        return []
    model.eval()
    device = _model_device(model)
    budget = token_budget or auto_token_budget(model, device)
    if budget < 1:
        raise ValueError(f"eval.token_budget: must be >= 1, got {budget}")
    scorings = {p.scoring for p in prepared}
    if len(scorings) > 1:
        raise ValueError("prepared: cells of one call share one scoring rule, "
                         f"got {sorted(scorings)}")
    if engine == "teacher" and scorings != {"exact"}:
        raise ValueError("eval.engine: teacher forcing scores every answer token; the digits rule "
                         "needs kv or naive")
    noises = _noise_for(prepared, model, device)
    out = _Verdicts(prepared, engine)
    kw = dict(budget=budget, recurrences=recurrences, require_eos=require_eos, device=device)
    mode = resolve_precision(precision, device, "eval.precision")
    model = mode.model_for(model)
    with mode.autocast():
        if engine == "teacher":
            _score_teacher(model, prepared, noises, out, **kw)
        else:
            decode = greedy_kv if engine == "kv" else greedy_naive
            _score_decoded(model, prepared, noises, out, decode=decode, **kw)
    return out.outcomes()


def predictions_per_recurrence(model, cell: PreparedCell, *, recurrences: int | None = None,
                               precision: str = "auto") -> list[list[str]]:
    """Fig. 15 (docs/official-code.md §7.8): texts[r][b] = what greedy decoding of problem b reads
    after recurrence r + 1.

    Every step feeds back the last recurrence's token (as the model would), with the cell's noise;
    each recurrence's argmax string is cut at its own first EOS and at the cell's decoding limit.
    """
    model.eval()
    device = _model_device(model)
    noise = _noise_for([cell], model, device)[0]
    depth = recurrences or model.cfg.test_recurrences
    texts = [[""] * cell.n for _ in range(depth)]
    groups: dict[int, list[int]] = defaultdict(list)
    for r, p in enumerate(cell.prompts):
        groups[len(p)].append(r)
    mode = resolve_precision(precision, device, "eval.precision")
    model = mode.model_for(model)
    with mode.autocast():
        for p_len, rows in groups.items():
            ids = torch.tensor([cell.prompts[r] for r in rows], dtype=torch.long, device=device)
            sub = None if noise is None else noise[rows, : p_len + cell.max_new]
            tokens = greedy_per_recurrence(model, ids, cell.max_new, recurrences=depth,
                                           noise=sub).cpu()
            for d in range(depth):
                m = match(tokens[d], [cell.targets[r] for r in rows], [cell.max_new] * len(rows))
                for b, r in enumerate(rows):
                    texts[d][r] = render(cell.tokenizer, m.predictions[b])
    return texts


def render(tokenizer, ids: Sequence[int]) -> str:
    """Text of generated ids before EOS; PAD prints as a space (its text form), UNK/BOS and unknown
    ids as U+FFFD (in no vocabulary), so a prediction's text never hides a token the way
    `Tokenizer.decode`, which drops specials, would."""
    table = tokenizer.id_to_char()
    table[0], table[1], table[2] = " ", SPECIAL_CHAR, SPECIAL_CHAR
    return "".join(table[t] if 0 <= t < len(table) else SPECIAL_CHAR for t in ids)
