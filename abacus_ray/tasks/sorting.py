"""Sorting (paper §4.3, A.2; docs/official-code.md §2.6): label each number, answer with the labels
in ascending order.

A problem of cell (d, m) (d = max digits, m = array length) is

    "Q:5073,R:046,S:16456,T:97,U:94="  ->  "U,T,R,Q,S"        (values 3705, 640, 65461, 79, 49)

Labels are m consecutive symbols of `SORT_LABELS` from a uniform random start, wrapping around.
Unlike the official code (whose labels can be ',' or ':'), `SORT_LABELS` excludes the separators, so
a label never reads as a separator. Element e has D_e ~ U{1..d} digits and a value uniform over
D_e-digit integers, written reversed. The answer sorts by value; ties keep their input order (stable
sort).

Word layout of one row: words[0] label start; then per element e, words[1 + e(d+1)] its digit count
and the next d words its digits (least significant first). Padding reads `pad_words`.
"""

from __future__ import annotations

import numpy as np

from abacus_ray.tasks.arithmetic import int_from_text, operand_digits
from abacus_ray.tasks.formats import Problem, pad_with_counts, padding_counts
from abacus_ray.tasks.randomness import bounded
from abacus_ray.tasks.tokenizer import SORT_LABELS


def check_sort_cell(d: int, m: int) -> None:
    if m > len(SORT_LABELS):
        raise ValueError(f"j: an array of {m} numbers needs {m} distinct labels, but only "
                         f"{len(SORT_LABELS)} label symbols exist")


def max_line_length(d: int, m: int) -> int:
    """Longest prompt + answer: m x "L:" + d digits, m-1 commas, "=", m labels, m-1 commas."""
    return m * (2 + d) + (m - 1) + 1 + m + (m - 1)


def words_needed(d: int, m: int) -> int:
    return 1 + m * (d + 1)


def sort_problems(d: int, m: int, words: np.ndarray, *, pad_p: float = 0.0,
                  pad_words: np.ndarray | None = None) -> list[Problem]:
    """One sorting problem per row of `words` (layout in the module docstring)."""
    check_sort_cell(d, m)
    rows = words.shape[0]
    starts = bounded(words[:, 0], len(SORT_LABELS)).astype(np.int64).tolist()
    elements = words[:, 1 : 1 + m * (d + 1)].reshape(rows * m, d + 1)
    counts = (bounded(elements[:, 0], d).astype(np.int64) + 1)
    digit_rows = operand_digits(elements[:, 1:], counts, 0, d)
    flat = (digit_rows + ord("0")).astype(np.uint8).tobytes().decode("ascii")
    counts = counts.tolist()
    pad_counts = padding_counts(pad_words, pad_p) if pad_p > 0 else None
    out = []
    for r in range(rows):
        labels = [SORT_LABELS[(starts[r] + e) % len(SORT_LABELS)] for e in range(m)]
        texts = []
        for e in range(m):
            k = r * m + e
            texts.append(flat[k * d : k * d + counts[k]])
        values = [int_from_text(t[::-1]) for t in texts]
        order = sorted(range(m), key=values.__getitem__)  # stable: ties keep input order
        prompt = ",".join(f"{label}:{text}"
                          for label, text in zip(labels, texts, strict=True)) + "="
        problem = Problem(prompt, ",".join(labels[e] for e in order))
        if pad_counts is not None:
            problem = pad_with_counts(problem, pad_counts[r])
        out.append(problem)
    return out
