"""Error analysis: how a wrong answer went wrong, from its first wrong token.

Every engine knows, per problem, the answer position of the first wrong token and the token the
model put there (teacher forcing: the argmax after the correct prefix, which is what greedy decoding
emits there too). That is enough to sort a wrong answer into one of three classes:

* `length`: an extra or a missing digit: EOS where a digit belongs (early stop), or a digit where
  the EOS belongs (one more digit);
* `carry` (addition): one digit off by one at a position that receives a carry, the error of a model
  that lost track of the carry; columns are counted from the least-significant digit, as written;
* `other`: anything else (a wrong digit without a carry, a stray symbol, a wrong hint, ...).

Cell rows count the classes (`n_carry_errors`, `n_length_errors`, `n_other_errors`) and keep one
wrong problem as an example; sample rows carry the class of each problem (docs/results-schema.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from abacus_ray.tasks.tokenizer import DIGIT_IDS, EOS

ERROR_CLASSES = ("carry", "length", "other")
_DIGITS = frozenset("0123456789")
_DIGIT_IDS = frozenset(DIGIT_IDS)


def carries_into(prompt: str) -> list[bool] | None:
    """For a reversed addition prompt "A+B=" (least-significant digit first): whether each answer
    column receives a carry; None if the prompt is not a plain addition (hints, other operators)."""
    body = prompt.replace(" ", "")
    if (not body.endswith("=") or body.count("+") != 1
            or any(c not in _DIGITS for c in body[:-1].replace("+", ""))):
        return None
    a, b = body[:-1].split("+")
    out, carry = [], 0
    for t in range(max(len(a), len(b)) + 1):
        out.append(carry == 1)
        s = (int(a[t]) if t < len(a) else 0) + (int(b[t]) if t < len(b) else 0) + carry
        carry = s // 10
    return out


def error_class(task: str, prompt: str, target: list[int], first_wrong: int,
                got: int) -> str | None:
    """The class of a problem whose first wrong answer token is `got` at position `first_wrong` of
    `target` (answer ids + EOS); None for a correct problem (`first_wrong` = -1)."""
    if first_wrong < 0:
        return None
    want = target[first_wrong] if first_wrong < len(target) else EOS
    if (want == EOS and got in _DIGIT_IDS) or (got == EOS and want in _DIGIT_IDS):
        return "length"
    if (task in ("add", "addsub") and want in _DIGIT_IDS and got in _DIGIT_IDS
            and (got - want) % 10 in (1, 9)):
        carries = carries_into(prompt)
        if carries is not None and first_wrong < len(carries) and carries[first_wrong]:
            return "carry"
    return "other"


@dataclass
class CellErrors:
    """A cell's wrong answers: the class of each problem, and what the cell row keeps of them."""

    classes: list[str | None]  # per problem; None where correct
    first_wrong: list[int]
    example: str | None  # the first wrong problem, e.g. "12+39= 15 | at 1: 4 for 5 (carry)"

    def columns(self) -> dict:
        """Cell-row columns: counts per class, where answers first go wrong, one example."""
        counts = {f"n_{c}_errors": sum(k == c for k in self.classes) for c in ERROR_CLASSES}
        wrong = [p for p in self.first_wrong if p >= 0]
        histogram = [0] * (max(wrong) + 1) if wrong else []
        for p in wrong:
            histogram[p] += 1
        return counts | {"first_wrong_counts": json.dumps(histogram), "error_example": self.example}


def cell_errors(outcome) -> CellErrors:
    """Classes of an `engine.CellOutcome`'s problems (its `prepared` cell: prompts, targets)."""
    p = outcome.prepared
    table = p.tokenizer.id_to_char()
    classes, example = [], None
    for r in range(outcome.n):
        target = p.targets[r]
        if p.drop_above is not None:  # index hints scored on digits: positions count digits only
            target = [t for t in target if t <= p.drop_above]
        fw, got = outcome.first_wrong[r], outcome.wrong_tokens[r]
        cls = error_class(p.cell.task, p.prompts_text[r], target, fw, got)
        classes.append(cls)
        if cls is not None and example is None:
            want = target[fw] if fw < len(target) else EOS

            def show(t: int) -> str:
                if t == EOS:
                    return "EOS"
                return table[t] if 0 <= t < len(table) and table[t].strip() else f"id {t}"
            example = (f"{p.prompts_text[r]} {p.answers_text[r]} | at {fw}: {show(got)} "
                       f"for {show(want)} ({cls})")
    return CellErrors(classes, list(outcome.first_wrong), example)
