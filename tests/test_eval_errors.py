"""Error classes (evaluation/errors.py): hand-made wrong answers, then through the evaluator."""

from types import SimpleNamespace

import pytest

from abacus_ray.config import preset
from abacus_ray.config.evaluation import EvalConfig
from abacus_ray.evaluation.errors import carries_into, error_class
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.runner import score_cells
from abacus_ray.tasks.tokenizer import EOS, get_tokenizer
from tests.test_eval_runner import FlawedOracle, true_answer

TOK = get_tokenizer("pad")


def ids(text: str) -> list[int]:
    return TOK.encode(text, eos=True)


def test_carries_into_each_answer_column():
    assert carries_into("5+5=") == [False, True]  # 5 + 5 = 10: the tens column receives the carry
    assert carries_into("99+1=") == [False, True, True]  # 99 + 1 = 100
    assert carries_into("12+34=") == [False, False, False]
    assert carries_into("A1+A2=") is None and carries_into("5-3=") is None


@pytest.mark.parametrize("prompt, answer, position, got, expected", [
    ("5+5=", "01", 1, "2", "carry"),  # 10 written 20: the carried column off by one
    ("5+5=", "01", 1, "0", "carry"),  # the carry dropped
    ("5+5=", "01", 1, "3", "other"),  # off by two
    ("5+5=", "01", 0, "1", "other"),  # off by one where nothing is carried in
    ("5+5=", "01", 1, EOS, "length"),  # stops one digit early
    ("12+34=", "64", 2, "0", "length"),  # a digit where the EOS belongs
    ("12+34=", "64", 1, "5", "other"),  # no carry anywhere
    ("21+93=", "411", 1, "2", "carry"),  # 12 + 39 = 51 ... reversed: the tens column receives one
])
def test_hand_made_wrong_answers(prompt, answer, position, got, expected):
    got_id = got if isinstance(got, int) else TOK.token_id(got)
    assert error_class("add", prompt, ids(answer), position, got_id) == expected
    assert error_class("add", prompt, ids(answer), -1, -1) is None  # correct: no class
    assert error_class("sub", prompt.replace("+", "-"), ids(answer), position, got_id) in ("length", "other")


class CarryOracle(FlawedOracle):
    """Adds right, except: it stops one digit early when the result r is divisible by 7, and else
    forgets the carry in the first column that receives one."""

    def answer_ids(self, prompt: str) -> list[int]:
        r = true_answer(prompt)
        digits = [int(d) for d in str(r)[::-1]]
        if r % 7 == 0:
            return TOK.encode("".join(map(str, digits[:-1])), eos=True)
        carries = carries_into(prompt)
        if any(carries):
            t = carries.index(True)
            digits[t] = (digits[t] - 1) % 10
        return TOK.encode("".join(map(str, digits)), eos=True)


def expected_class(prompt: str) -> str | None:
    r = true_answer(prompt)
    if r % 7 == 0:
        return "length"
    return "carry" if any(carries_into(prompt)) else None


def test_classes_through_the_evaluator_match_python_arithmetic():
    ckpt = SimpleNamespace(model=CarryOracle().eval(), config=preset("tiny"), model_id="carry", path="memory")
    cells = [Cell("add", 1, 1), Cell("add", 3, 2), Cell("add", 6, 6)]
    rows, samples = score_cells(ckpt, cells, EvalConfig(per_cell=40, seed=2), samples=True)  # KV decoding
    for s in samples:
        assert s["error"] == expected_class(s["prompt"]), s
    for row in rows:
        mine = [s for s in samples if (s["i"], s["j"]) == (row["i"], row["j"])]
        assert row["n_carry_errors"] == sum(s["error"] == "carry" for s in mine)
        assert row["n_length_errors"] == sum(s["error"] == "length" for s in mine)
        assert row["n_other_errors"] == 0 and row["n"] - row["n_correct"] == sum(s["error"] is not None for s in mine)
        if row["n_correct"] < row["n"]:
            assert row["error_example"].startswith(next(s["prompt"] for s in mine if s["error"]))
    assert sum(r["n_carry_errors"] for r in rows) > 0 and sum(r["n_length_errors"] for r in rows) > 0
    keys = ("n_carry_errors", "n_length_errors", "n_other_errors", "first_wrong_counts", "error_example")
    for engine in ("teacher", "naive"):  # the teacher-forced classes are the decoders' classes
        plain, _ = score_cells(ckpt, cells, EvalConfig(per_cell=40, seed=2, engine=engine))
        assert [{k: r[k] for k in keys} for r in plain] == [{k: r[k] for k in keys} for r in rows]
