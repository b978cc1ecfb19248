"""Three-operand addition as a task of one's own: `task.name=add3`.

Cell (i, j) holds A + B + C with A of exactly i digits and B and C of exactly j digits, written as
the built-in addition writes its lines: every number least significant digit first, so
17 + 205 + 309 = 531 in cell (2, 3) reads "71+502+903=135". Three numbers under 10^n sum to under
3 * 10^n, so the answer has at most max(i, j) + 1 digits. Registered at import;
run it with the package as it is installed:

    abacus-ray train --plugin examples/add3.py --preset tiny --set task.name=add3
    abacus-ray sweep fig10_k --plugin examples/add3.py --set task.name=add3
"""

import numpy as np

from abacus_ray.plugins import register_task


def operand(digits: int, rng: np.random.Generator) -> int:
    """A uniform integer of exactly `digits` digits (no leading zero)."""
    first = int(rng.integers(1, 10))
    rest = rng.integers(0, 10, size=digits - 1).tolist()
    return int(str(first) + "".join(map(str, rest)))


def reverse(n: int) -> str:
    return str(n)[::-1]


def problem(i: int, j: int, rng: np.random.Generator) -> tuple[str, str]:
    """One problem of cell (i, j): prompt "A+B+C=" and the sum, each reversed."""
    a, b, c = operand(i, rng), operand(j, rng), operand(j, rng)
    return f"{reverse(a)}+{reverse(b)}+{reverse(c)}=", reverse(a + b + c)


def longest_line(i: int, j: int) -> int:
    """i + j + j digits, two '+' and '=', and an answer of up to max(i, j) + 1 digits."""
    return i + 2 * j + 3 + max(i, j) + 1


register_task("add3", problem, longest_line)
