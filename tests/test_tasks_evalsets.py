"""`eval_problems`: fixed, independent, reproducible cells with exact operand lengths."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_tasks_oracle import check_arithmetic, check_hinted, check_or, check_sort

from abacus_ray.seeds import stable_key
from abacus_ray.tasks import eval_problems, eval_set, generate
from abacus_ray.tasks.randomness import row_words

REPO = Path(__file__).resolve().parents[1]


def test_golden_cells():
    """Pinned values: if these change, every stored eval result was scored on other problems."""
    assert stable_key("eval", "add", 3, 2, 0) == 0x87F03B8E0EDC365060A8CC51BDA6152F
    assert eval_problems("add", 3, 2, 3, seed=0) == [
        ("707+26=", "967"), ("795+55=", "256"), ("871+32=", "102")]
    assert eval_problems("sort", 3, 4, 2, seed=0) == [
        ("K:21,L:5,M:162,N:5=", "L,N,K,M"), ("b:05,c:795,d:1,e:04=", "d,e,b,c")]


@pytest.mark.parametrize("task", ["add", "sub", "mul", "addsub"])
def test_exact_lengths_and_answers(task):
    for i, j in [(1, 1), (4, 17), (17, 4), (100, 100), (160, 160)]:
        problems = eval_problems(task, i, j, 20, seed=0)
        assert len(problems) == 20
        for p in problems:
            check_arithmetic(p.prompt, p.answer, i, j)


def test_sort_and_or_cells():
    for p in eval_problems("sort", 30, 30, 10, seed=1):
        check_sort(p.prompt, p.answer, 30, 30)
    cell = eval_problems("or", 40, 7, 100, seed=1)
    assert sorted(check_or(p.prompt, p.answer, 40, 7) for p in cell) == list(range(7))
    assert len(eval_problems("or", 150, 120, 100, seed=1)) == 100


def test_deterministic_prefix_and_independent_cells():
    a = eval_problems("add", 12, 9, 100, seed=4)
    assert a == eval_problems("add", 12, 9, 100, seed=4)
    assert a[:30] == eval_problems("add", 12, 9, 30, seed=4)
    assert a != eval_problems("add", 12, 9, 100, seed=5)
    # a cell does not depend on which other cells are built, nor in which order
    grid = eval_set("add", [(12, 9), (9, 12), (1, 1)], 100, seed=4)
    reverse = eval_set("add", [(1, 1), (9, 12), (12, 9)], 100, seed=4)
    assert grid == reverse and grid[(12, 9)] == a
    # eval sets never reuse the draws of `generate` with the same seed
    assert a != generate("add", 12, 9, 100, seed=4)
    # distinct cells of the same shape but different tasks are different draws
    subs = eval_problems("sub", 12, 9, 100, seed=4)
    assert [p.prompt.replace("-", "+") for p in subs] != [p.prompt for p in a]


@pytest.mark.slow  # spawns Python processes
def test_same_across_processes_and_hash_seeds():
    code = ("from abacus_ray.tasks import eval_problems; "
            "print(repr(eval_problems('sort', 5, 6, 4, seed=3) + eval_problems('add', 30, 2, 4, seed=3)))")
    outputs = set()
    for hash_seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        run = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True,
                             text=True, timeout=120, check=True)
        outputs.add(run.stdout)
    assert len(outputs) == 1
    local = repr(eval_problems("sort", 5, 6, 4, seed=3) + eval_problems("add", 30, 2, 4, seed=3))
    assert outputs == {local + "\n"}


def test_index_hints_start_at_the_first_symbol_by_default():
    for mode in ("cyclic", "noncyclic"):
        cell = eval_problems("add", 5, 8, 10, seed=0, index_hints=mode)
        assert {check_hinted(p.prompt, p.answer, mode, start=0) for p in cell} == {0}
        assert all(p.prompt.startswith("A") for p in cell)
    shifted = eval_problems("sub", 5, 8, 10, seed=0, index_hints="cyclic", hint_start=100)
    assert {check_hinted(p.prompt, p.answer, "cyclic", start=100) for p in shifted} == {100}
    plain = eval_problems("sub", 5, 8, 10, seed=0)
    assert [p.prompt.replace("-", "") for p in plain] == [
        "".join(c for c in q.prompt if c.isdigit() or c == "=") for q in shifted]


def test_eval_prompts_are_unpadded_unless_asked():
    assert not any(" " in p.prompt + p.answer for p in eval_problems("add", 20, 20, 50, 0))
    padded = eval_problems("add", 20, 20, 50, 0, pad_p=0.5)
    assert any(" " in p.prompt for p in padded)


@pytest.mark.parametrize("call,message", [
    (lambda: eval_problems("add", 0, 1, 100, 0), "i: must be >= 1, got 0"),
    (lambda: eval_problems("add", 1, 0, 100, 0), "j: must be >= 1, got 0"),
    (lambda: eval_problems("add", 1, 1, 0, 0), "count: must be >= 1, got 0"),
    (lambda: eval_problems("pow", 1, 1, 1, 0), "task: 'pow' is not one of"),
    (lambda: eval_problems("add", 1, 1, 1, 0, reverse=True), "reverse: unknown eval-set variant"),
    (lambda: eval_problems("add", 1, 1, 1, 0, pad_p=2), "pad_p: must be a number in [0, 1)"),
    (lambda: eval_problems("sort", 3, 200, 1, 0), "j: an array of 200 numbers"),
    (lambda: eval_problems("add", 120, 3, 1, 0, index_hints="noncyclic"), "i: 120+3-digit add"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value).startswith(message), str(e.value)


def test_row_words_are_counter_addressed():
    """Row r of a word stream does not depend on how many rows are drawn before it."""
    key = stable_key("x", 1)
    full = row_words(key, 0, 10, 8)
    assert (row_words(key, 3, 4, 8) == full[3:7]).all()
    with pytest.raises(ValueError, match="^width: must be a multiple of 4"):
        row_words(key, 0, 1, 6)
