"""An independent oracle for problems in model format, plus tests that it rejects wrong problems.

The oracle parses prompt text back into Python ints / lists and recomputes the answer with plain
Python (never through the generators' code). The other test_tasks_* files import it.
"""

from __future__ import annotations

import re

import pytest

from abacus_ray.tasks.tokenizer import HINT_SYMBOLS, SORT_LABELS

ARITH = re.compile(r"^(\d+)([+\-x])(\d+)=$")


def reversed_number(text: str) -> int:
    """A reversed operand: must be all digits, the most significant (last) digit nonzero."""
    assert text.isdigit(), text
    assert text[-1] != "0", f"leading zero in {text[::-1]}"
    return int(text[::-1])


def expected_answer(a: int, op: str, b: int) -> str:
    value = {"+": a + b, "-": a - b, "x": a * b}[op]
    return str(abs(value))[::-1] + ("-" if value < 0 else "")


def check_arithmetic(prompt: str, answer: str, i: int | None = None, j: int | None = None,
                     ops: str = "+-x") -> tuple[int, str, int]:
    """Assert `prompt`/`answer` is a correct reversed arithmetic problem; returns (A, op, B)."""
    m = ARITH.match(prompt)
    assert m, f"not an arithmetic prompt: {prompt!r}"
    a_text, op, b_text = m.groups()
    assert op in ops, (op, ops)
    if i is not None:
        assert len(a_text) == i, (prompt, i)
    if j is not None:
        assert len(b_text) == j, (prompt, j)
    a, b = reversed_number(a_text), reversed_number(b_text)
    assert answer == expected_answer(a, op, b), (prompt, answer)
    return a, op, b


def strip_hints(text: str) -> tuple[str, list[str]]:
    """Remove hint symbols; assert each digit is preceded by exactly one; return (text, hints)."""
    plain, hints, pending = [], [], None
    for ch in text:
        if ch in HINT_SYMBOLS:
            assert pending is None, f"two hints in a row in {text!r}"
            pending = ch
        elif ch.isdigit():
            assert pending is not None, f"digit without a hint in {text!r}"
            hints.append(pending)
            plain.append(ch)
            pending = None
        else:
            assert pending is None, f"hint before a non-digit in {text!r}"
            plain.append(ch)
    assert pending is None
    return "".join(plain), hints


def check_hinted(prompt: str, answer: str, mode: str, start: int | None = None) -> int:
    """Assert an index-hinted problem: one hint sequence h_t shared by A, B and C; returns its start."""
    assert prompt.endswith("=")
    body = prompt[:-1]
    op_pos = next(k for k, ch in enumerate(body) if ch in "+-" and k > 0)
    numbers = [body[:op_pos], body[op_pos + 1 :], answer]
    plain, sequences = [], []
    for number in numbers:
        text, hints = strip_hints(number)
        plain.append(text)
        sequences.append(hints)
    check_arithmetic(f"{plain[0]}{body[op_pos]}{plain[1]}=", plain[2], ops="+-")
    first = HINT_SYMBOLS.index(sequences[0][0])
    longest = max(len(s) for s in sequences)
    for seq in sequences:
        assert seq == [HINT_SYMBOLS[(first + t) % len(HINT_SYMBOLS)] for t in range(len(seq))], seq
    if mode == "noncyclic":
        assert first + longest <= len(HINT_SYMBOLS), (first, longest)
    if start is not None:
        assert first == start
    return first


def check_sort(prompt: str, answer: str, d: int | None = None, m: int | None = None) -> None:
    """Assert a sorting problem: consecutive cyclic labels, reversed numbers, stable ascending answer."""
    assert prompt.endswith("=") and prompt.count("=") == 1
    elements = prompt[:-1].split(",")
    labels, values = [], []
    for element in elements:
        label, colon, digits = element[0], element[1], element[2:]
        assert colon == ":" and label in SORT_LABELS and label not in ",:=", element
        if d is not None:
            assert 1 <= len(digits) <= d
        labels.append(label)
        values.append(reversed_number(digits))
    if m is not None:
        assert len(labels) == m
    first = SORT_LABELS.index(labels[0])
    assert labels == [SORT_LABELS[(first + e) % len(SORT_LABELS)] for e in range(len(labels))]
    order = sorted(range(len(values)), key=lambda e: (values[e], e))
    assert answer == ",".join(labels[e] for e in order), (prompt, answer)


def check_or(prompt: str, answer: str, i: int | None = None, j: int | None = None) -> int:
    """Assert a one-hot OR problem (left-aligned bit strings); returns the one-hot index."""
    m = re.fullmatch(r"([01]+)\+([01]+)=", prompt)
    assert m, prompt
    u, v = m.groups()
    if i is not None:
        assert len(u) == i and len(v) == j
    width = max(len(u), len(v))
    padded = zip(u.ljust(width, "0"), v.ljust(width, "0"), strict=True)
    expected = "".join(str(int(x) | int(y)) for x, y in padded)
    assert answer == expected
    assert (u + v).count("1") == 1 and answer.count("1") == 1
    assert ("1" in u) == (len(u) < len(v)) or len(u) == len(v)
    return answer.index("1")


# --- the oracle itself must be able to fail -------------------------------------------------------


def test_oracle_accepts_the_papers_examples():
    check_arithmetic("98282+3859172=", "2787472")  # 28289 + 2719583 = 2747872 (paper)
    check_arithmetic("4-8=", "4-")
    check_arithmetic("3-418=", "118-")
    check_arithmetic("9x74=", "324")
    check_arithmetic("51x49=", "0141")
    check_hinted("e6+e9f4=", "e5f5", "cyclic")
    check_sort("Q:5073,R:046,S:16456,T:97,U:94=", "U,T,R,Q,S")
    assert check_or("001+00000=", "00100") == 2


@pytest.mark.parametrize("prompt,answer", [
    ("98282+3859172=", "2787473"),  # wrong digit
    ("98282+3859172=", "2787472-"),  # wrong sign
    ("4-8=", "4"),
    ("980+1=", "99"),  # operand 089 has a leading zero
    ("12x3=", "63"),
])
def test_oracle_rejects_wrong_arithmetic(prompt, answer):
    with pytest.raises(AssertionError):
        check_arithmetic(prompt, answer)


@pytest.mark.parametrize("prompt,answer", [
    ("e6+e9g4=", "e5f5"),  # skipped a symbol
    ("e6+f9g4=", "f5g5"),  # A's sequence starts elsewhere
    ("e6+e94=", "e5f5"),  # digit without a hint
])
def test_oracle_rejects_wrong_hints(prompt, answer):
    with pytest.raises(AssertionError):
        check_hinted(prompt, answer, "cyclic")


def test_oracle_rejects_wrong_sorts_and_ors():
    with pytest.raises(AssertionError):
        check_sort("Q:5073,R:046=", "Q,R")  # 3705 < 640 is false
    with pytest.raises(AssertionError):
        check_sort("Q:5,S:4=", "S,Q")  # labels not consecutive
    with pytest.raises(AssertionError):
        check_or("001+00000=", "00010")
