"""`generate`: every task's problems checked by the independent oracle, variants, determinism, errors."""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tasks_oracle import (
    check_arithmetic,
    check_hinted,
    check_or,
    check_sort,
    reversed_number,
    strip_hints,
)

from abacus_ray.tasks import generate, get_tokenizer
from abacus_ray.tasks.arithmetic import reversed_answer, text_from_int
from abacus_ray.tasks.formats import Problem, pad_thresholds, random_padding
from abacus_ray.tasks.tokenizer import HINT_SYMBOLS, SORT_LABELS

ARITH_OPS = {"add": "+", "sub": "-", "mul": "x", "addsub": "+-"}


def test_papers_addition_example_format():
    # 28289 + 2719583 = 2747872 is written reversed, answer reversed, no EOS in the text (docs/official-code.md §2.1)
    assert reversed_answer(28289 + 2719583) == "2787472"
    assert reversed_answer(4 - 8) == "4-"
    assert reversed_answer(3 - 814) == "118-"
    assert reversed_answer(0) == "0"


@pytest.mark.parametrize("task", ["add", "sub", "mul", "addsub"])
@pytest.mark.parametrize("i,j", [(1, 1), (1, 7), (7, 1), (5, 5), (20, 20), (13, 30)])
def test_arithmetic_answers_and_exact_lengths(task, i, j):
    problems = generate(task, i, j, 50, seed=3)
    assert len(problems) == 50 and all(isinstance(p, Problem) for p in problems)
    ops = Counter()
    for p in problems:
        _, op, _ = check_arithmetic(p.prompt, p.answer, i, j, ops=ARITH_OPS[task])
        ops[op] += 1
    if task == "addsub":
        assert ops["+"] > 5 and ops["-"] > 5


def test_subtraction_produces_negative_and_zero_answers():
    answers = [p.answer for p in generate("sub", 1, 1, 400, seed=0)]
    assert any(a.endswith("-") for a in answers)
    assert "0" in answers  # a - a = 0 for one-digit operands happens often enough
    assert not any(a.endswith("-") for a in (p.answer for p in generate("sub", 5, 2, 50, 0)))


@pytest.mark.parametrize("task", ["add", "sub", "mul"])
def test_thousand_digit_operands(task):
    for p in generate(task, 1000, 1000, 3, seed=1):
        check_arithmetic(p.prompt, p.answer, 1000, 1000)
    for p in generate(task, 1000, 7, 2, seed=1):
        check_arithmetic(p.prompt, p.answer, 1000, 7)


def test_answers_past_pythons_int_string_limit():
    old = sys.get_int_max_str_digits()
    problems = generate("mul", 2500, 2400, 1, seed=0)  # 4899-4900-digit product
    sys.set_int_max_str_digits(0)
    try:
        for p in problems:
            check_arithmetic(p.prompt, p.answer, 2500, 2400)
    finally:
        sys.set_int_max_str_digits(old)
    assert text_from_int(10**5000) == "1" + "0" * 5000


def test_operand_digits_are_uniform():
    """Leading digits 1..9 and the other digits 0..9 appear about equally often."""
    problems = generate("add", 4, 4, 3000, seed=11)
    lead, rest = Counter(), Counter()
    for p in problems:
        a = p.prompt.split("+")[0]
        lead[a[-1]] += 1
        rest.update(a[:-1])
    assert set(lead) == set("123456789")
    assert max(lead.values()) < 1.25 * 3000 / 9 and min(lead.values()) > 0.75 * 3000 / 9
    assert set(rest) == set("0123456789")
    assert max(rest.values()) < 1.15 * 9000 / 10 and min(rest.values()) > 0.85 * 9000 / 10


def test_determinism_and_seed_independence():
    for task in ("add", "sub", "mul", "addsub", "sort", "or"):
        assert generate(task, 6, 9, 30, seed=5) == generate(task, 6, 9, 3 * 10, seed=5)
        if task != "or":
            assert generate(task, 6, 9, 30, seed=5) != generate(task, 6, 9, 30, seed=6)
    # different cells and tasks of one seed are different draws
    assert generate("add", 6, 9, 30, 5) != generate("add", 9, 6, 30, 5)


def test_smaller_count_is_a_prefix():
    assert generate("add", 8, 3, 10, seed=2) == generate("add", 8, 3, 40, seed=2)[:10]
    assert generate("sort", 5, 7, 4, seed=2) == generate("sort", 5, 7, 9, seed=2)[:4]


@pytest.mark.parametrize("d,m", [(1, 1), (3, 5), (10, 10), (30, 30), (2, 100)])
def test_sorting(d, m):
    problems = generate("sort", d, m, 40, seed=4)
    for p in problems:
        check_sort(p.prompt, p.answer, d, m)
    starts = {SORT_LABELS.index(p.prompt[0]) for p in problems}
    assert len(starts) > 1  # labels start at a random symbol
    get_tokenizer("sort").encode(problems[0].prompt + problems[0].answer)  # all in the vocabulary


def test_sorting_digit_counts_cover_one_to_d_and_labels_never_separators():
    problems = generate("sort", 4, 10, 200, seed=0)
    counts = Counter(len(e[2:]) for p in problems for e in p.prompt[:-1].split(","))
    assert set(counts) == {1, 2, 3, 4}
    labels = {p.prompt[0] for p in generate("sort", 1, 100, 5, 0)}
    assert not labels & {",", ":", "="}
    assert set(SORT_LABELS) >= labels


def test_sorting_ties_keep_input_order():
    # one-digit numbers in arrays of 30 must repeat; the oracle checks stability
    for p in generate("sort", 1, 30, 20, seed=9):
        check_sort(p.prompt, p.answer, 1, 30)


@pytest.mark.parametrize("i,j", [(1, 1), (3, 5), (5, 3), (4, 4), (20, 20), (1, 20)])
def test_bitwise_or_exhaustive_cells(i, j):
    k = min(i, j)
    for count in (k, k + 5, 100):
        problems = generate("or", i, j, count, seed=0)
        assert len(problems) == k
        assert sorted(check_or(p.prompt, p.answer, i, j) for p in problems) == list(range(k))
        assert len(set(problems)) == k


def test_bitwise_or_sampled_cells_and_coin():
    problems = generate("or", 30, 30, 20, seed=1)
    assert len(problems) == 20
    holders = Counter("1" in p.prompt.split("+")[0] for p in problems)
    assert holders[True] and holders[False]  # i = j: a coin picks the operand holding the one-hot
    for p in problems:
        check_or(p.prompt, p.answer, 30, 30)


@pytest.mark.parametrize("task", ["add", "sub", "addsub"])
@pytest.mark.parametrize("mode", ["cyclic", "noncyclic"])
def test_index_hints(task, mode):
    problems = generate(task, 12, 9, 300, seed=7, index_hints=mode)
    starts = [check_hinted(p.prompt, p.answer, mode) for p in problems]
    assert len(set(starts)) > 50
    if mode == "cyclic":  # wrap-around happens for starts near the end of the list
        assert any(s + 10 > len(HINT_SYMBOLS) for s in starts)
    plain = generate(task, 12, 9, 300, seed=7)
    for p, q in zip(problems, plain, strict=True):  # same operands as the unhinted cell
        assert strip_hints(p.prompt)[0] == q.prompt


def test_noncyclic_hints_never_wrap_and_cover_only_reachable_starts():
    problems = generate("add", 101, 1, 200, seed=0, index_hints="noncyclic")  # 101 or 102 hints
    starts = {check_hinted(p.prompt, p.answer, "noncyclic") for p in problems}
    assert starts <= {0, 1}
    fixed = generate("add", 3, 4, 5, seed=0, index_hints="cyclic", hint_start=0)
    assert {check_hinted(p.prompt, p.answer, "cyclic", start=0) for p in fixed} == {0}
    assert fixed[0].prompt.startswith("A")


def test_random_padding_rule_and_rates():
    p = 0.3
    problems = generate("add", 10, 10, 400, seed=3, pad_p=p)
    plain = generate("add", 10, 10, 400, seed=3)
    runs = Counter()
    chars = 0
    for padded, q in zip(problems, plain, strict=True):
        assert padded.prompt.replace(" ", "") == q.prompt and padded.answer.replace(" ", "") == q.answer
        assert padded.prompt.endswith("=") and not padded.answer.endswith(" ")
        line = padded.prompt + padded.answer
        chars += len(line.replace(" ", ""))
        k = 0
        for ch in line:
            if ch == " ":
                k += 1
            else:
                runs[k] += 1
                k = 0
    at_least_1 = sum(v for k, v in runs.items() if k >= 1) / chars
    at_least_2 = sum(v for k, v in runs.items() if k >= 2) / chars
    assert abs(at_least_1 - p) < 0.03
    assert abs(at_least_2 - p * 0.1 * p) < 0.006
    assert max(runs) <= 4
    # padding applies to sorting and OR lines too, and leaves the text intact
    for q in generate("sort", 3, 4, 20, 0, pad_p=0.5):
        check_sort(q.prompt.replace(" ", ""), q.answer.replace(" ", ""), 3, 4)
    for q in generate("or", 4, 6, 4, 0, pad_p=0.5):
        check_or(q.prompt.replace(" ", ""), q.answer.replace(" ", ""), 4, 6)


def test_padding_thresholds_follow_the_q_times_point_one_rule():
    t = pad_thresholds(0.5)
    assert t[:3] == pytest.approx([0.5, 0.5 * 0.05, 0.5 * 0.05 * 0.005])
    assert len(pad_thresholds(0.0)) == 0
    out = random_padding(Problem("1+2=", "3"), np.array([0.0, 0.9, 0.9, 0.0, 0.0]), 0.5)
    # u = 0 is below every threshold: the maximum number of spaces goes before that character
    k = len(pad_thresholds(0.5))
    assert out == Problem(" " * k + "1+2" + " " * k + "=", " " * k + "3")


def test_hinted_and_padded_together():
    for p in generate("sub", 5, 6, 50, 2, index_hints="cyclic", pad_p=0.4):
        check_hinted(p.prompt.replace(" ", ""), p.answer.replace(" ", ""), "cyclic")
        get_tokenizer("index").encode(p.prompt + p.answer)


@settings(max_examples=60, deadline=None)
@given(task=st.sampled_from(["add", "sub", "mul", "addsub"]), i=st.integers(1, 60), j=st.integers(1, 60),
       seed=st.integers(-(2**40), 2**40), count=st.integers(1, 5))
def test_property_arithmetic(task, i, j, seed, count):
    problems = generate(task, i, j, count, seed)
    assert len(problems) == count
    for p in problems:
        check_arithmetic(p.prompt, p.answer, i, j, ops=ARITH_OPS[task])


@settings(max_examples=40, deadline=None)
@given(d=st.integers(1, 25), m=st.integers(1, 40), seed=st.integers(0, 2**63))
def test_property_sort(d, m, seed):
    for p in generate("sort", d, m, 2, seed):
        check_sort(p.prompt, p.answer, d, m)


@settings(max_examples=40, deadline=None)
@given(i=st.integers(1, 40), j=st.integers(1, 40), seed=st.integers(0, 10**6),
       mode=st.sampled_from(["cyclic", "noncyclic"]), pad=st.sampled_from([0.0, 0.2]))
def test_property_hints(i, j, seed, mode, pad):
    for p in generate("addsub", i, j, 2, seed, index_hints=mode, pad_p=pad):
        check_hinted(p.prompt.replace(" ", ""), p.answer.replace(" ", ""), mode)
        a = strip_hints(p.prompt.replace(" ", ""))[0]
        assert len(a.split("+" if "+" in a else "-")[0]) == i


@pytest.mark.parametrize("call,message", [
    (lambda: generate("add", 0, 3, 5, 0), "i: must be >= 1, got 0"),
    (lambda: generate("add", 3, -1, 5, 0), "j: must be >= 1, got -1"),
    (lambda: generate("add", 3, 3, 0, 0), "count: must be >= 1, got 0"),
    (lambda: generate("add", 3.0, 3, 1, 0), "i: must be an integer"),
    (lambda: generate("add", 3, 3, 1, "0"), "seed: must be an integer"),
    (lambda: generate("div", 3, 3, 5, 0), "task: 'div' is not one of"),
    (lambda: generate("add", 3, 3, 5, 0, pad_p=1.0), "pad_p: must be a number in [0, 1)"),
    (lambda: generate("add", 3, 3, 5, 0, pad_p=-0.1), "pad_p:"),
    (lambda: generate("add", 3, 3, 5, 0, index_hints="both"), "index_hints: 'both' is not one of"),
    (lambda: generate("mul", 3, 3, 5, 0, index_hints="cyclic"), "index_hints: apply to add, sub"),
    (lambda: generate("sort", 3, 3, 5, 0, index_hints="cyclic"), "index_hints: apply to add, sub"),
    (lambda: generate("add", 102, 5, 5, 0, index_hints="noncyclic"), "i: 102+5-digit add problems"),
    (lambda: generate("add", 5, 200, 5, 0, index_hints="noncyclic"), "j: 5+200-digit"),
    (lambda: generate("sort", 3, 101, 5, 0), "j: an array of 101 numbers needs 101 distinct labels"),
    (lambda: generate("add", 3, 3, 5, 0, index_hints="cyclic", hint_start=102), "hint_start: must be < 102"),
    (lambda: generate("add", 90, 3, 5, 0, index_hints="noncyclic", hint_start=20),
     "hint_start: 20 + up to 91 hints"),
])
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value).startswith(message), str(e.value)


def test_limits_that_still_fit():
    assert len(generate("add", 101, 101, 3, 0, index_hints="noncyclic")) == 3  # 102 hints at most
    assert len(generate("sub", 102, 102, 3, 0, index_hints="noncyclic")) == 3
    assert len(generate("add", 500, 500, 2, 0, index_hints="cyclic")) == 2  # cyclic wraps freely
    assert len(generate("sort", 2, 100, 2, 0)) == 2
    assert reversed_number(generate("add", 1, 1, 1, 0)[0].prompt.split("+")[0]) >= 1
