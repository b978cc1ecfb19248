"""The exact-match engine: scores many cells of one model with one of three interchangeable engines.

* `teacher` (default): one forward over prompt + answer + EOS per problem (`teacher_forcing`). Rows of
  many cells are sorted by length and packed into batches of at most `token_budget` tokens
  (rows x padded length), so short cells share a batch and long ones are split.
* `kv`: greedy decoding with a KV cache (`decoding.greedy_kv`); rows of all cells are grouped by
  prompt length (no attention padding) and chunked by the same budget. Produces predictions.
* `naive`: greedy decoding with a full forward per token, the official loop; baseline and oracle.

All three see the same per-cell noise (`noise`), so their per-problem verdicts agree; the tests check
this on every task and position scheme. Each cell's decoders may emit up to `decode_limit` tokens:
the answer field + EOS + 2 spare tokens (so an over-long answer is visible in the samples), and twice
the answer field for sorting, as the official sorting eval does (spec §7.6).
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from abacus_ray.evaluation.decoding import greedy_kv, greedy_naive, match
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.noise import cell_noise, cell_seed
from abacus_ray.evaluation.teacher_forcing import teacher_forced
from abacus_ray.tasks.tokenizer import PAD

ENGINES = ("teacher", "kv", "naive")
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


def decode_limit(task: str, longest_answer: int) -> int:
    """Tokens a decoder may emit for a cell whose longest answer has `longest_answer` tokens."""
    field_width = longest_answer + 1  # + EOS
    return 2 * field_width if task == "sort" else field_width + SPARE_TOKENS


def prepare_cell(cell: Cell, problems: Sequence, tokenizer, eval_seed: int) -> PreparedCell:
    """Tokenize a cell's `Problem`s (prompt, answer) and fix its decoding limit and noise seed."""
    if not problems:
        raise ValueError(f"cell {cell.task} {cell.i}x{cell.j}: has no problems")
    prompts = [tokenizer.encode(p.prompt) for p in problems]
    targets = [tokenizer.encode(p.answer, eos=True) for p in problems]
    max_new = decode_limit(cell.task, max(len(t) for t in targets) - 1)
    return PreparedCell(cell, [p.prompt for p in problems], [p.answer for p in problems], prompts, targets,
                        max_new, max(len(p) for p in prompts) + max_new,
                        cell_seed(eval_seed, cell.task, cell.i, cell.j), tokenizer)


def precision_context(device: torch.device, precision: str = "auto"):
    """Autocast for `precision` (auto: bf16 on CUDA, fp32 elsewhere)."""
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    if dtype is None:
        raise ValueError(f"eval.precision: {precision!r} is not one of auto, fp32, bf16, fp16")
    return torch.autocast(device_type=device.type, dtype=dtype)


def resolved_precision(device: torch.device, precision: str = "auto") -> str:
    return ("bf16" if device.type == "cuda" else "fp32") if precision == "auto" else precision


def auto_token_budget(model, device: torch.device) -> int:
    """Tokens per batch (rows x padded length): fixed on CPU, sized to free memory on CUDA.

    The CUDA estimate charges each token its per-layer activations, a 512-key attention row per head,
    the noise and logits, and its KV-cache entries for every layer application, then uses half of
    the free memory.
    """
    if device.type != "cuda":
        return 8192
    cfg = model.cfg
    per_token = 4 * (16 * cfg.hidden + 2 * cfg.intermediate + 2 * cfg.heads * 512 + 2 * model.vocab_size)
    per_token += 2 * 2 * cfg.hidden * cfg.layers * cfg.test_recurrences * 2
    free, _total = torch.cuda.mem_get_info(device)
    return int(max(4096, min(1 << 21, free * 0.5 // per_token)))


def _noise_for(prepared: Sequence[PreparedCell], model, device: torch.device) -> list[Tensor | None]:
    return [cell_noise(model.cfg, c.seed, c.n, c.noise_len, device) for c in prepared]


def _gather(noises: list[Tensor | None], rows: list[tuple[int, int]], length: int, hidden: int,
            device: torch.device) -> Tensor | None:
    """Noise [len(rows), length, hidden] for rows (cell index, row); consecutive rows copy as blocks."""
    if noises[rows[0][0]] is None:
        return None
    out = torch.zeros(len(rows), length, hidden, device=device)
    b = 0
    while b < len(rows):
        c, r = rows[b]
        e = b
        while e + 1 < len(rows) and rows[e + 1] == (c, r + (e + 1 - b)):
            e += 1
        src = noises[c]
        n = min(length, src.shape[1])
        out[b:e + 1, :n] = src[r:r + (e + 1 - b), :n]
        b = e + 1
    return out


def _chunks(rows: list, cost_len, budget: int):
    """Consecutive chunks of `rows` with len(chunk) * max(cost_len) <= budget (at least one row each)."""
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


def run_cells(model, prepared: Sequence[PreparedCell], *, engine: str = "teacher", recurrences: int | None = None,
              require_eos: bool = True, token_budget: int | None = None, precision: str = "auto") -> list[CellOutcome]:
    """Score `prepared` cells on `model` (eval mode is set here) with `engine`; one outcome per cell.

    A cell's `seconds` is the wall time of the batches it was in, split among their cells by token count.
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
    noises = _noise_for(prepared, model, device)
    n_cells = len(prepared)
    correct = [[False] * c.n for c in prepared]
    first_wrong = [[-1] * c.n for c in prepared]
    first_ok = [[False] * c.n for c in prepared]
    preds: list[list[str]] | None = None if engine == "teacher" else [[""] * c.n for c in prepared]
    stopped: list[list[bool]] | None = None if engine == "teacher" else [[False] * c.n for c in prepared]
    seconds = [0.0] * n_cells
    hidden = model.cfg.hidden

    def charge(rows: list[tuple[int, int]], elapsed: float, cost) -> None:
        weights = defaultdict(float)
        for c, r in rows:
            weights[c] += cost(c, r)
        total = sum(weights.values()) or 1.0
        for c, w in weights.items():
            seconds[c] += elapsed * w / total

    with precision_context(device, precision):
        if engine == "teacher":
            order = sorted(range(n_cells), key=lambda c: max(len(p) + len(t) for p, t in
                                                             zip(prepared[c].prompts, prepared[c].targets)))
            rows = [(c, r) for c in order for r in range(prepared[c].n)]
            length = lambda row: len(prepared[row[0]].prompts[row[1]]) + len(prepared[row[0]].targets[row[1]])  # noqa: E731
            for chunk in _chunks(rows, length, budget):
                t0 = time.perf_counter()
                s = max(length(row) for row in chunk)
                ids = torch.full((len(chunk), s), PAD, dtype=torch.long)
                mask = torch.zeros((len(chunk), s), dtype=torch.bool)
                for b, (c, r) in enumerate(chunk):
                    p, t = prepared[c].prompts[r], prepared[c].targets[r]
                    ids[b, :len(p) + len(t)] = torch.tensor(p + t)
                    mask[b, len(p):len(p) + len(t)] = True
                ids, mask = ids.to(device), mask.to(device)
                noise = _gather(noises, chunk, s, hidden, device)
                res = teacher_forced(model, ids, mask, recurrences=recurrences, noise=noise, require_eos=require_eos)
                ok, fw, fc = res.correct.tolist(), res.first_wrong.tolist(), res.first_correct.tolist()
                for b, (c, r) in enumerate(chunk):
                    correct[c][r], first_wrong[c][r], first_ok[c][r] = ok[b], fw[b], fc[b]
                charge(chunk, time.perf_counter() - t0, lambda c, r: length((c, r)))
        else:
            decode = greedy_kv if engine == "kv" else greedy_naive
            groups: dict[int, list[tuple[int, int]]] = defaultdict(list)
            for c, cell in enumerate(prepared):
                for r, p in enumerate(cell.prompts):
                    groups[len(p)].append((c, r))
            for p_len in sorted(groups):
                cost = lambda row: p_len + prepared[row[0]].max_new  # noqa: E731,B023
                for chunk in _chunks(groups[p_len], cost, budget):
                    t0 = time.perf_counter()
                    max_new = max(prepared[c].max_new for c, _ in chunk)
                    ids = torch.tensor([prepared[c].prompts[r] for c, r in chunk], dtype=torch.long, device=device)
                    noise = _gather(noises, chunk, p_len + max_new, hidden, device)
                    gen = decode(model, ids, max_new, recurrences=recurrences, noise=noise)
                    m = match(gen.cpu(), [prepared[c].targets[r] for c, r in chunk],
                              [prepared[c].max_new for c, _ in chunk], require_eos=require_eos)
                    for b, (c, r) in enumerate(chunk):
                        correct[c][r], first_wrong[c][r], first_ok[c][r] = (m.correct[b], m.first_wrong[b],
                                                                            m.first_correct[b])
                        preds[c][r] = render(prepared[c].tokenizer, m.predictions[b])
                        stopped[c][r] = m.stopped[b]
                    charge(chunk, time.perf_counter() - t0, lambda c, r: p_len + prepared[c].max_new)  # noqa: B023
    return [CellOutcome(prepared[c].cell, engine, correct[c], first_wrong[c], first_ok[c], seconds[c],
                        None if preds is None else preds[c], None if stopped is None else stopped[c], prepared[c])
            for c in range(n_cells)]



def render(tokenizer, ids: Sequence[int]) -> str:
    """Text of generated ids before EOS; PAD prints as a space (its text form), UNK/BOS and unknown ids
    as U+FFFD (in no vocabulary), so a prediction's text never hides a token the way
    `Tokenizer.decode`, which drops specials, would."""
    table = tokenizer.id_to_char()
    table[0], table[1], table[2] = " ", SPECIAL_CHAR, SPECIAL_CHAR
    return "".join(table[t] if 0 <= t < len(table) else SPECIAL_CHAR for t in ids)
