"""Counter-based randomness for problem generation: every random choice is a fixed 64-bit word.

Why words and not a stateful RNG: a problem row owns a fixed block of `width` uint64 words taken
from a Philox stream keyed on a stable hash (`seeds.stable_key`, never Python's salted `hash()`).
Row r of a batch therefore lies at a known counter position, so

* a DDP rank draws only its own rows, and they equal the matching rows of the unsharded batch;
* the vectorised fast path and the readable string path of the same task read the same words for the
  same choices, so they produce bit-identical problems (a test checks this);
* asking for fewer problems gives a prefix of asking for more.

Each word is mapped to a value with a multiply-shift (`bounded`): a value's probability is off by
less than 2**-44 for any range up to 2**20 (digits, a label start, a one-hot index, a coin). Words
are drawn as raw output, one per choice, so the consumption never depends on the values drawn.
"""

from __future__ import annotations

import numpy as np

WORDS_PER_COUNTER = 4  # Philox4x64 emits four uint64 per counter increment


def row_width(words_needed: int) -> int:
    """`words_needed` rounded up to whole Philox counters, so rows start on counter boundaries."""
    return -(-max(words_needed, 1) // WORDS_PER_COUNTER) * WORDS_PER_COUNTER


def row_words(key: int, first_row: int, rows: int, width: int) -> np.ndarray:
    """Words of rows `first_row .. first_row + rows - 1` of the stream `key`: uint64 array
    [rows, width].

    `width` must be a multiple of 4 (see `row_width`); row r always starts at word r * width.
    """
    if width % WORDS_PER_COUNTER:
        raise ValueError(f"width: must be a multiple of {WORDS_PER_COUNTER}, got {width}")
    bitgen = np.random.Philox(key=key, counter=first_row * width // WORDS_PER_COUNTER)
    return bitgen.random_raw(rows * width).reshape(rows, width)


def bounded(words: np.ndarray, k: int | np.ndarray) -> np.ndarray:
    """Uniform integers in [0, k) from uint64 words by multiply-shift; exact in consumption, bias
    < 2**-44."""
    k_min, k_max = int(np.min(k)), int(np.max(k))
    if k_min < 1 or k_max > 1 << 20:
        raise ValueError(f"k: must be in [1, 2**20], got {k_min}..{k_max}")
    shift = max(k_max.bit_length(), 1)
    return ((words >> np.uint64(shift)) * np.asarray(k, dtype=np.uint64)) >> np.uint64(64 - shift)


def digits(words: np.ndarray) -> np.ndarray:
    """Uniform decimal digits 0..9 (int64)."""
    return bounded(words, 10).astype(np.int64)


def leading_digits(words: np.ndarray) -> np.ndarray:
    """Uniform nonzero digits 1..9 (int64): an exact-length operand's most significant digit."""
    return bounded(words, 9).astype(np.int64) + 1


def unit(words: np.ndarray) -> np.ndarray:
    """Uniform floats in [0, 1) with 53 random bits."""
    return (words >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
