"""`generate`: the problems of one (i, j) cell, a pure function of (task, i, j, count, seed,
variant).

Tasks (docs/official-code.md §2): "add", "sub", "mul" and "addsub" (each problem '+' or '-' with
probability 1/2) take operands of exactly i and j digits; "sort" reads i as the max number of
digits and j as the array length; "or" takes vector lengths i and j and has exactly min(i, j)
distinct problems, all of which are returned (in one-hot order) when count >= min(i, j).

The per-task modules (`arithmetic`, `sorting`, `bitwise`) turn a matrix of random words into
problems; this module validates arguments, keys the words on a stable hash of the cell, and
dispatches. The training stream reuses `problems_from_words` on its own words.
"""

from __future__ import annotations

import numpy as np

from abacus_ray import plugins
from abacus_ray.config.task import TASKS, task_names
from abacus_ray.seeds import stable_key
from abacus_ray.tasks import arithmetic, bitwise, sorting
from abacus_ray.tasks.formats import HINT_MODES, Problem, pad_with_counts, padding_counts
from abacus_ray.tasks.randomness import WORDS_PER_COUNTER, row_width, row_words
from abacus_ray.tasks.tokenizer import ARITH_CHARS, HINT_SYMBOLS

__all__ = ["Problem", "TASKS", "generate", "cell_problems", "problems_from_words", "words_needed",
           "pad_words_needed", "check_int", "check_variant"]


def check_int(name: str, value: object, minimum: int | None = None) -> int:
    """`value` as an int, or a ValueError naming `name` (bools and floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value}")
    return int(value)


def check_variant(task: str, i: int, j: int, index_hints: str, pad_p: float,
                  hint_start: int | None) -> None:
    """Validate the format variant of a cell before any word is drawn."""
    if index_hints not in HINT_MODES:
        raise ValueError(f"index_hints: {index_hints!r} is not one of {', '.join(HINT_MODES)}")
    if isinstance(pad_p, bool) or not isinstance(pad_p, (int, float)) or not 0.0 <= pad_p < 1.0:
        raise ValueError(f"pad_p: must be a number in [0, 1), got {pad_p!r}")
    if hint_start is not None:
        check_int("hint_start", hint_start, 0)
        if hint_start >= len(HINT_SYMBOLS):
            raise ValueError(f"hint_start: must be < {len(HINT_SYMBOLS)}, got {hint_start}")
    if task in arithmetic.ARITHMETIC_TASKS:
        arithmetic.check_hints(task, i, j, index_hints)
    elif index_hints != "none":
        raise ValueError(f"index_hints: apply to add, sub and addsub only, not task {task!r}")
    if task == "sort":
        sorting.check_sort_cell(i, j)


# A plugin task's row seeds a numpy Generator with one Philox counter's words (256 bits)
PLUGIN_WORDS = WORDS_PER_COUNTER
_ALPHABET = frozenset(ARITH_CHARS) - {" "}  # the pad vocabulary's characters; a space is padding


def words_needed(task: str, i: int, j: int) -> int:
    """Random words one problem of cell (i, j) reads (padding aside); monotone in i and j."""
    if task in plugins.TASKS:
        return PLUGIN_WORDS
    if task == "sort":
        return sorting.words_needed(i, j)
    if task == "or":
        return bitwise.words_needed(i, j)
    return arithmetic.words_needed(i, j)


def pad_words_needed(task: str, i: int, j: int, index_hints: str = "none") -> int:
    """Random-padding words one problem reads: one per character of its longest possible line."""
    if task in plugins.TASKS:
        return plugins.TASKS[task].longest_line(i, j)
    if task == "sort":
        return sorting.max_line_length(i, j)
    if task == "or":
        return bitwise.max_line_length(i, j)
    return arithmetic.max_line_length(task, i, j, index_hints)


def problems_from_words(task: str, i: int, j: int, words: np.ndarray, *, index_hints: str = "none",
                        pad_p: float = 0.0, pad_words: np.ndarray | None = None,
                        hint_start: int | None = None, exhaustive: bool = False) -> list[Problem]:
    """One problem per row of `words` (uint64 [rows, >= words_needed]); arguments already validated.

    `pad_words` ([rows, >= pad_words_needed]) is required when pad_p > 0.
    """
    if pad_p > 0 and (pad_words is None or pad_words.shape[0] != words.shape[0]):
        raise ValueError("pad_words: one row of padding words per problem is required when "
                         "pad_p > 0")
    if task in plugins.TASKS:
        return plugin_problems(task, i, j, words, pad_p=pad_p, pad_words=pad_words)
    if task == "sort":
        return sorting.sort_problems(i, j, words, pad_p=pad_p, pad_words=pad_words)
    if task == "or":
        return bitwise.or_problems(i, j, words, exhaustive=exhaustive, pad_p=pad_p,
                                   pad_words=pad_words)
    return arithmetic.arithmetic_problems(task, i, j, words, index_hints=index_hints, pad_p=pad_p,
                                          pad_words=pad_words, hint_start=hint_start)


def plugin_problems(task: str, i: int, j: int, words: np.ndarray, *, pad_p: float = 0.0,
                    pad_words: np.ndarray | None = None) -> list[Problem]:
    """A plugin task's problems, one per row, each from a Generator seeded on its row's words;
    every line is checked against the vocabulary and the task's own `longest_line` bound."""
    plugin = plugins.TASKS[task]
    longest = plugin.longest_line(i, j)
    out = []
    for row in words[:, :PLUGIN_WORDS]:
        prompt, answer = plugin.problem(i, j, np.random.default_rng(row.tolist()))
        line = f"{prompt}{answer}"
        if (not isinstance(prompt, str) or not isinstance(answer, str) or not prompt.endswith("=")
                or "=" in prompt[:-1] + answer or not answer or not set(line) <= _ALPHABET):
            raise ValueError(f"task {task!r}: problem({i}, {j}) wrote {prompt!r} -> {answer!r}; "
                             "a prompt ends with its only '=', and both use only 0-9 + - x")
        if len(line) > longest:
            raise ValueError(f"task {task!r}: problem({i}, {j}) wrote a {len(line)}-character "
                             f"line, past its longest_line({i}, {j}) = {longest}")
        out.append(Problem(prompt, answer))
    if pad_p > 0:
        out = list(map(pad_with_counts, out, padding_counts(pad_words, pad_p)))
    return out


def cell_problems(domain: str, task: str, i: int, j: int, count: int, seed: int, *,
                  index_hints: str = "none", pad_p: float = 0.0,
                  hint_start: int | None = None) -> list[Problem]:
    """Validated problems of cell (i, j) drawn from the word stream keyed on (domain, task, i, j,
    seed).

    `count` is not in the key, so a smaller count yields a prefix of a larger one (except the
    exhaustive bitwise-OR case). The variant is not in the key either, and padding draws from a
    stream of its own: a padded or hinted cell has the same operands as the plain one.
    """
    if task not in task_names():
        raise ValueError(f"task: {task!r} is not one of {', '.join(task_names())}")
    i, j = check_int("i", i, 1), check_int("j", j, 1)
    count, seed = check_int("count", count, 1), check_int("seed", seed)
    check_variant(task, i, j, index_hints, pad_p, hint_start)
    exhaustive = task == "or" and count >= min(i, j)
    rows = min(i, j) if exhaustive else count
    words = row_words(stable_key(domain, task, i, j, seed), 0, rows,
                      row_width(words_needed(task, i, j)))
    pad_words = None
    if pad_p > 0:
        pad_width = row_width(pad_words_needed(task, i, j, index_hints))
        pad_words = row_words(stable_key(domain, "padding", task, i, j, seed), 0, rows, pad_width)
    return problems_from_words(task, i, j, words, index_hints=index_hints, pad_p=pad_p,
                               pad_words=pad_words, hint_start=hint_start, exhaustive=exhaustive)


def generate(task: str, i: int, j: int, count: int, seed: int, *, index_hints: str = "none",
             pad_p: float = 0.0, hint_start: int | None = None) -> list[Problem]:
    """`count` problems of cell (i, j) in model format; deterministic in all arguments.

    index_hints: "none" | "cyclic" | "noncyclic" (add/sub/addsub only); `hint_start` fixes the first
    hint symbol instead of drawing it. pad_p: random-padding probability in [0, 1).
    """
    return cell_problems("generate", task, i, j, count, seed, index_hints=index_hints, pad_p=pad_p,
                         hint_start=hint_start)
