"""Vectorised schoolbook arithmetic on digit matrices: the training stream's fast path for + - x.

A batch of mixed (i, j) rows is one digit matrix per operand ([rows, n], least significant digit
first, zeros past each operand's length). Carries and borrows run column by column over all rows at
once, and token ids are scattered straight into the padded batch: no Python string or int per
sample.
It reads the same words as `arithmetic.arithmetic_problems` (layout there), so both paths give
identical batches; a test holds them to it.
"""

from __future__ import annotations

import numpy as np

from abacus_ray.tasks.arithmetic import operand_digits
from abacus_ray.tasks.randomness import bounded
from abacus_ray.tasks.tokenizer import EOS, FIRST_DIGIT_ID, Tokenizer


def add_columns(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Digits of a + b: [rows, n] + [rows, n] -> [rows, n + 1]."""
    rows, n = a.shape
    total = (a + b).T  # column-major: one contiguous row per digit place
    out = np.empty((n + 1, rows), dtype=np.int64)
    carry = np.zeros(rows, dtype=np.int64)
    for t in range(n):
        v = total[t] + carry
        carry = (v >= 10).astype(np.int64)
        out[t] = v - 10 * carry
    out[n] = carry
    return out.T


def _subtract(a_t: np.ndarray, b_t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column-major a - b with borrow: (digits mod 10**n, final borrow)."""
    out = np.empty_like(a_t)
    borrow = np.zeros(a_t.shape[1], dtype=np.int64)
    diff = a_t - b_t
    for t in range(a_t.shape[0]):
        v = diff[t] - borrow
        borrow = (v < 0).astype(np.int64)
        out[t] = v + 10 * borrow
    return out, borrow


def sub_columns(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Digits of |a - b| ([rows, n]) and whether a - b < 0."""
    a_t, b_t = a.T, b.T
    forward, borrow = _subtract(a_t, b_t)
    negative = borrow.astype(bool)
    if negative.any():
        backward, _ = _subtract(b_t, a_t)
        forward = np.where(negative, backward, forward)
    return forward.T, negative


def mul_columns(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Digits of a * b: [rows, n] x [rows, n] -> [rows, 2n] (long multiplication, then carries)."""
    rows, n = a.shape
    acc = np.zeros((2 * n, rows), dtype=np.int64)
    a_t, b_t = a.T, b.T
    for t in range(n):
        acc[t : t + n] += a_t[t] * b_t
    carry = np.zeros(rows, dtype=np.int64)
    for t in range(2 * n):
        v = acc[t] + carry
        carry = v // 10
        acc[t] = v - 10 * carry
    return acc.T


def digit_lengths(c: np.ndarray) -> np.ndarray:
    """Number of digits of each row's value (the highest nonzero place + 1; 1 for the value 0)."""
    width = c.shape[1]
    nonzero = c != 0
    last = width - 1 - np.argmax(nonzero[:, ::-1], axis=1)
    return np.where(nonzero.any(axis=1), last + 1, 1)


def arithmetic_token_batch(task: str, i: np.ndarray, j: np.ndarray, words: np.ndarray, n: int,
                           tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token ids [rows, S] (S = longest row), target mask and lengths of `A op B = C [EOS]` rows.

    `i`, `j`: per-row operand lengths (<= n); `words`: each row's random words (arithmetic layout).
    """
    rows = words.shape[0]
    a = operand_digits(words, i, 0, n)
    b = operand_digits(words, j, i, n)
    r = np.arange(rows)
    plus, minus, times = (tokenizer.token_id(c) for c in "+-x")
    if task == "mul":
        c, negative, op_ids = mul_columns(a, b), np.zeros(rows, dtype=bool), np.full(rows, times)
    elif task == "add":
        c, negative, op_ids = add_columns(a, b), np.zeros(rows, dtype=bool), np.full(rows, plus)
    else:
        diff, negative = sub_columns(a, b)
        if task == "sub":
            c, op_ids = diff, np.full(rows, minus)
        else:  # addsub: the operator coin sits right after the operand digits
            is_sub = bounded(words[r, i + j], 2) == 1
            c = np.where(is_sub[:, None], np.pad(diff, ((0, 0), (0, 1))), add_columns(a, b))
            negative &= is_sub
            op_ids = np.where(is_sub, minus, plus)
    c_len = digit_lengths(c)

    b_start, eq_pos, c_start = i + 1, i + 1 + j, i + j + 2
    minus_pos = c_start + c_len
    eos_pos = minus_pos + negative
    lengths = eos_pos + 1
    ids = np.zeros((rows, int(lengths.max())), dtype=np.int64)
    for digits_, count, start in ((a, i, np.zeros_like(i)), (b, j, b_start), (c, c_len, c_start)):
        rr, tt = np.nonzero(np.arange(digits_.shape[1]) < count[:, None])
        ids[rr, start[rr] + tt] = digits_[rr, tt] + FIRST_DIGIT_ID
    ids[r, i] = op_ids
    ids[r, eq_pos] = tokenizer.equals_id
    ids[r[negative], minus_pos[negative]] = minus
    ids[r, eos_pos] = EOS
    cols = np.arange(ids.shape[1])
    mask = (cols >= c_start[:, None]) & (cols < lengths[:, None])
    return ids, mask, lengths
