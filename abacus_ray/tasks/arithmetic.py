"""Addition, subtraction, multiplication and the +/- mix: the exact reference path.

The official generators: docs/official-code.md §2.1, §3.1.

A row of a cell (i, j) reads its random words in this fixed layout, which the training stream's
vectorised fast path (`digit_arithmetic`) shares, so both paths yield the same problems:

    words[0 : i]        digits of A, least significant first; word i-1 gives the leading digit 1..9
    words[i : i+j]      digits of B, likewise
    words[i+j]          the operator of an "addsub" problem (coin: '+' or '-')
    words[i+j+1]        the index-hint start symbol

Random padding reads a separate word matrix (`pad_words`, one word per character of the finished
line), so a padded problem has the same operands as its unpadded twin.

Operands are uniform over exactly-i-digit and exactly-j-digit integers (never 0, no leading zero; a
reversed operand may start with 0: 120 -> "021"). Answers are Python ints, exact at any length.
"""

from __future__ import annotations

import numpy as np

from abacus_ray.tasks.formats import (
    Problem,
    digit_count,
    hint_starts,
    hinted_problem,
    pad_with_counts,
    padding_counts,
)
from abacus_ray.tasks.randomness import bounded, digits, leading_digits
from abacus_ray.tasks.tokenizer import HINT_SYMBOLS

ARITHMETIC_TASKS = ("add", "sub", "mul", "addsub")
OPERATORS = {"add": "+", "sub": "-", "mul": "x"}
FIXED_WORDS = 2  # operator coin + hint start, after the operand digits
_CHUNK = 1000  # decimal digits per int<->str step: stays under Python's 4300-digit conversion limit


def max_answer_length(task: str, i: int, j: int) -> int:
    """Longest answer text of cell (i, j), a '-' sign included."""
    return i + j if task == "mul" else max(i, j) + 1


def max_hints(task: str, i: int, j: int) -> int:
    """Most hint symbols one problem of cell (i, j) can need: its longest digit run count."""
    return max(i, j) if task == "sub" else max(i, j) + 1


def max_line_length(task: str, i: int, j: int, index_hints: str = "none") -> int:
    """Longest prompt + answer text of cell (i, j): the random-padding words one row needs."""
    answer = max_answer_length(task, i, j)
    line = i + 1 + j + 1 + answer
    if index_hints != "none":
        line += i + j + answer  # one hint per digit (a '-' takes none, so this is an upper bound)
    return line


def words_needed(i: int, j: int) -> int:
    return i + j + FIXED_WORDS


def check_hints(task: str, i: int, j: int, index_hints: str) -> None:
    """Fail before drawing anything when a non-cyclic hint sequence could run past the symbols."""
    if index_hints == "none":
        return
    if task not in ("add", "sub", "addsub"):
        raise ValueError(f"index_hints: apply to add, sub and addsub only, not task {task!r}")
    try:
        hint_starts(max_hints(task, i, j), index_hints)
    except ValueError as e:
        culprit = "i" if i >= j else "j"
        raise ValueError(f"{culprit}: {i}+{j}-digit {task} problems are too long for {e}") from None


def operand_digits(words: np.ndarray, lengths, offsets, width: int) -> np.ndarray:
    """Digit matrix [rows, width] (int64, least significant first) of exactly-`lengths`-digit
    operands.

    Row r's digit t comes from words[r, offsets[r] + t]; the digit at t = lengths[r] - 1 is drawn
    from 1..9 and digits at t >= lengths[r] are 0. `lengths`/`offsets` are scalars or per-row
    arrays.
    """
    rows = words.shape[0]
    lengths = np.broadcast_to(np.asarray(lengths, dtype=np.int64), (rows,))[:, None]
    offsets = np.broadcast_to(np.asarray(offsets, dtype=np.int64), (rows,))[:, None]
    t = np.arange(width)
    idx = np.minimum(offsets + t, words.shape[1] - 1)
    w = np.take_along_axis(words, idx, axis=1)
    d = np.where(t == lengths - 1, leading_digits(w), digits(w))
    return np.where(t < lengths, d, 0)


def operators(task: str, words: np.ndarray) -> np.ndarray:
    """The operator character per row: fixed, or a fair coin between '+' and '-' for "addsub"."""
    if task == "addsub":
        return np.where(bounded(words, 2) == 1, "-", "+")
    return np.full(words.shape[0], OPERATORS[task])


def int_from_text(text: str) -> int:
    """`int(text)` for any number of digits (chunked past Python's conversion limit)."""
    if len(text) <= _CHUNK:
        return int(text)
    value = 0
    for k in range(0, len(text), _CHUNK):
        piece = text[k : k + _CHUNK]
        value = value * 10 ** len(piece) + int(piece)
    return value


def text_from_int(value: int) -> str:
    """`str(value)` for any non-negative int (chunked past Python's conversion limit)."""
    base = 10**_CHUNK
    if value < base:
        return str(value)
    pieces = []
    while value >= base:
        value, low = divmod(value, base)
        pieces.append(str(low).zfill(_CHUNK))
    pieces.append(str(value))
    return "".join(reversed(pieces))


def reversed_answer(value: int) -> str:
    """The answer in model format: digits reversed, a minus sign at the end ("-811" -> "118-")."""
    text = text_from_int(abs(value))[::-1]
    return text + "-" if value < 0 else text


def _row_texts(digit_matrix: np.ndarray, lengths: np.ndarray) -> list[str]:
    """Row r's first lengths[r] digits as a string, in matrix (reversed-number) order."""
    width = digit_matrix.shape[1]
    flat = (digit_matrix + ord("0")).astype(np.uint8).tobytes().decode("ascii")
    return [flat[k : k + n]
            for k, n in zip(range(0, len(flat), width), lengths.tolist(), strict=True)]


def arithmetic_problems(task: str, i, j, words: np.ndarray, *, index_hints: str = "none",
                        pad_p: float = 0.0, pad_words: np.ndarray | None = None,
                        hint_start: int | None = None) -> list[Problem]:
    """One problem per row of `words` (layout in the module docstring); answers via Python ints.

    `i`, `j` are the operand lengths: ints for one cell, or per-row arrays (the training stream).
    """
    rows = words.shape[0]
    i = np.broadcast_to(np.asarray(i, dtype=np.int64), (rows,))
    j = np.broadcast_to(np.asarray(j, dtype=np.int64), (rows,))
    check_hints(task, int(i.max()), int(j.max()), index_hints)
    a_texts = _row_texts(operand_digits(words, i, 0, int(i.max())), i)
    b_texts = _row_texts(operand_digits(words, j, i, int(j.max())), j)
    r_all = np.arange(rows)
    ops = operators(task, words[r_all, i + j]).tolist()
    answers = []
    for a, b, op in zip(a_texts, b_texts, ops, strict=True):
        x, y = int_from_text(a[::-1]), int_from_text(b[::-1])
        answers.append(reversed_answer(x + y if op == "+" else x - y if op == "-" else x * y))
    if index_hints == "none":
        rows_text = zip(a_texts, b_texts, ops, answers, strict=True)
        problems = [Problem(f"{a}{op}{b}=", c) for a, b, op, c in rows_text]
    else:
        if hint_start is None:
            needed = np.maximum(np.maximum(i, j), [digit_count(c) for c in answers])
            starts = bounded(words[r_all, i + j + 1],
                             _hint_start_choices(needed, index_hints)).tolist()
        else:
            most = max_hints(task, int(i.max()), int(j.max()))
            if index_hints == "noncyclic" and hint_start + most > len(HINT_SYMBOLS):
                raise ValueError(f"hint_start: {hint_start} + up to {most} hints would wrap around "
                                 f"the {len(HINT_SYMBOLS)} symbols")
            starts = [hint_start] * rows
        rows_text = zip(a_texts, ops, b_texts, answers, starts, strict=True)
        problems = [hinted_problem(a, op, b, c, start) for a, op, b, c, start in rows_text]
    if pad_p > 0:
        problems = list(map(pad_with_counts, problems, padding_counts(pad_words, pad_p)))
    return problems


def _hint_start_choices(needed: np.ndarray, mode: str) -> np.ndarray:
    """Per-row number of admissible hint starts (`hint_starts` for each row's hint count)."""
    return np.asarray([hint_starts(int(k), mode) for k in needed], dtype=np.int64)
