"""The model's text format: the `Problem` record and the paper's two format variants.

The official formats: docs/official-code.md §2.3, §2.4.

A problem is a prompt ending in "=" and an answer, both reversed (least-significant digit first) and
without EOS, which the encoder appends. The variants rewrite a finished problem:

* index hints (paper A.7.5, Fig. 21): every digit of A, B and C is preceded by the hint symbol h_t
  of its place t (t = 0 for the least-significant digit), with one hint sequence shared by all
  three numbers, e.g. 6 + 49 = 55 -> "e6+e9f4=" / "e5f5". The official generator crashes before
  assembling this line; `{hA}{op}{hB}={hC}` is the intended format (docs/official-code.md §2.4).
* random padding (paper A.7.4, Fig. 20): spaces, which tokenize to PAD, inserted before each
  character of the finished line, answer included.
"""

from __future__ import annotations

from operator import add
from typing import NamedTuple

import numpy as np

from abacus_ray.tasks.randomness import unit
from abacus_ray.tasks.tokenizer import HINT_SYMBOLS


class Problem(NamedTuple):
    """One problem in model format: `prompt` ends with "=", `answer` is the reversed result
    without EOS."""

    prompt: str
    answer: str


HINT_MODES = ("none", "cyclic", "noncyclic")
_DIGITS = frozenset("0123456789")
_HINT_RING = "".join(HINT_SYMBOLS)


def digit_count(text: str) -> int:
    return sum(ch in _DIGITS for ch in text)


def hint_starts(needed: int, mode: str) -> int:
    """How many start symbols a hint sequence of `needed` symbols may begin at (drawn uniformly).

    Cyclic: any of the 102 (the list wraps). Non-cyclic: only starts that need no wrap, so later
    symbols are seen less often, as the paper describes. The official code draws from 0..102 (0
    twice as likely, docs/official-code.md §2.4); we draw uniformly.
    """
    n = len(HINT_SYMBOLS)
    if mode == "cyclic":
        return n
    if mode == "noncyclic":
        if needed > n:
            raise ValueError(f"index_hints: non-cyclic hints need {needed} symbols, "
                             f"but only {n} exist")
        return n - needed + 1
    raise ValueError(f"index_hints: {mode!r} is not one of {', '.join(HINT_MODES)}")


def hint_run(start: int, count: int) -> str:
    """The hint symbols h_0..h_{count-1} of a sequence starting at list position `start`,
    wrapping."""
    ring = _HINT_RING * ((start + count) // len(_HINT_RING) + 1)
    return ring[start : start + count]


def with_hints(number: str, start: int) -> str:
    """`number` (reversed digits, maybe a trailing '-') with hint h_t before its t-th digit.

    The trailing '-' of a negative reversed answer is not a digit and gets no hint.
    """
    end = len(number) - 1 if number.endswith("-") else len(number)
    return "".join(map(add, hint_run(start, end), number[:end])) + number[end:]


def hinted_problem(a: str, op: str, b: str, answer: str, start: int) -> Problem:
    """`{hA}{op}{hB}=` / `{hC}` from reversed operands and answer, one hint sequence for all
    three."""
    return Problem(f"{with_hints(a, start)}{op}{with_hints(b, start)}=", with_hints(answer, start))


def pad_thresholds(p: float) -> np.ndarray:
    """P(at least k spaces), k = 1, 2, ...: the official rule "q = p; while U < q: space, q *= 0.1".

    P(>= k) = prod_{t<k} p * 0.1**t; terms below 2**-53 can never fire and are dropped.
    """
    out, prob, q = [], 1.0, p
    while True:
        prob *= q
        if prob < 2.0**-53:
            return np.asarray(out, dtype=np.float64)
        out.append(prob)
        q *= 0.1


def space_counts(uniforms: np.ndarray, p: float) -> np.ndarray:
    """Spaces to insert before each character, one uniform per character (the official loop's
    law).

    The count is the number of thresholds P(>= k) above the uniform: k spaces with probability
    P(>= k) - P(>= k+1), exactly as the sequential "while U < q" draws give.
    """
    ascending = pad_thresholds(p)[::-1]
    return len(ascending) - np.searchsorted(ascending, np.asarray(uniforms), side="right")


def padding_counts(pad_words: np.ndarray, p: float) -> list[list[int]]:
    """Spaces before each character for a whole matrix of padding words (one word per character)."""
    return space_counts(unit(pad_words), p).tolist()


def pad_with_counts(problem: Problem, counts) -> Problem:
    """Insert counts[c] spaces before character c of prompt + answer (the answer's own spaces stay
    in it)."""
    line = problem.prompt + problem.answer
    if len(counts) < len(line):
        raise ValueError(f"counts: need {len(line)} entries, got {len(counts)}")
    padded = [" " * k + ch if k else ch for ch, k in zip(line, counts, strict=False)]
    cut = len(problem.prompt)
    return Problem("".join(padded[:cut]), "".join(padded[cut:]))


def random_padding(problem: Problem, uniforms: np.ndarray, p: float) -> Problem:
    """Insert spaces before every character of prompt + answer; `uniforms` holds one draw per
    character.

    Spaces before the answer's first character belong to the answer (they follow "=").
    """
    line_length = len(problem.prompt) + len(problem.answer)
    if len(uniforms) < line_length:
        raise ValueError(f"uniforms: need {line_length} draws, got {len(uniforms)}")
    return pad_with_counts(problem, space_counts(uniforms[:line_length], p).tolist())
