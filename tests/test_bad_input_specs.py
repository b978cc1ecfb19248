"""Bad input is refused (2/3): grid specs, problem strings and generator arguments, and evaluation
lengths beyond the Abacus table."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusal import FUZZ, assert_refused, tally
from test_bad_input import NEGATIVE, _not_in

from abacus_ray.config.task import TASKS
from abacus_ray.evaluation import grids as grids_mod
from abacus_ray.evaluation.grids import grid_from_string, parse_cells, parse_diagonal
from abacus_ray.tasks import eval_problems, generate, get_tokenizer
from abacus_ray.tasks.stream import encode_problems
from abacus_ray.tasks.tokenizer import SORT_LABELS

# --- 4. grid specs ----------------------------------------------------------------------------------

_spec_chars = st.text(alphabet="0123456789-x+:, cellsdiagon", max_size=14)
GRID_TEXT = _spec_chars | st.text(max_size=14) | st.builds(lambda k, s: f"{k}:{s}", st.sampled_from(["cells", "diagonal",
                                                                                                     "grid", ""]), _spec_chars)
GRID_CULPRITS = ("--grid", "--cells", "--diagonal")


@settings(FUZZ, max_examples=200)
@given(text=GRID_TEXT, parser=st.sampled_from([grid_from_string, parse_cells, parse_diagonal]))
def test_grid_specs_parse_or_refuse_naming_the_flag(text, parser):
    try:
        grid = parser(text)
    except ValueError as e:
        assert str(e).startswith(GRID_CULPRITS) and "\n" not in str(e) and len(str(e)) < 400, str(e)
        tally("grid specs (parser)")
        return
    assert 1 <= len(grid.pairs) <= grids_mod.MAX_CELLS
    assert all(1 <= i <= grids_mod.MAX_LENGTH and 1 <= j <= grids_mod.MAX_LENGTH for i, j in grid.pairs)


@FUZZ
@given(text=GRID_TEXT, flag=st.sampled_from(["--grid", "--cells", "--diagonal"]))
def test_grid_specs_are_refused_through_the_cli(text, flag, ckpt, work):
    parser = {"--grid": grid_from_string, "--cells": parse_cells, "--diagonal": parse_diagonal}[flag]
    try:
        parser(text)
        return  # a valid spec: the CLI would evaluate it
    except ValueError:
        pass
    out = work / "never-written"
    assert_refused(["eval", str(ckpt), "--out", str(out), "--quiet", f"{flag}={text}"], GRID_CULPRITS,
                   "grid specs (CLI)", roots=[work])
    assert not out.exists()


@pytest.mark.parametrize("spec", ["1-99999999999", "1-100001", "1-1000x1-1001", "1-700x1-700+1-800x1-800",
                                  "9" * 19, "1-5:0", "7-3", "0", "1x", "x1", "1x1x1", "cells:", "diagonal:1-",
                                  "1-9,,3", "nope:1x1", "１-３"])
def test_grid_specs_that_would_explode_or_are_empty(spec):
    parsers = [grid_from_string, parse_cells, parse_diagonal]
    for parser in parsers:
        with pytest.raises(ValueError, match=r"^--(grid|cells|diagonal): "):
            parser(spec)
    tally("grid specs (parser)", len(parsers))


# --- 5. problem strings and generator arguments ------------------------------------------------------------

@FUZZ
@given(text=st.text(max_size=20), name=st.sampled_from(["pad", "index", "sort"]))
def test_problem_text_outside_the_vocabulary_is_refused(text, name):
    tok = get_tokenizer(name)
    vocab = set(tok.chars) | {" "}
    if set(text) <= vocab:
        assert tok.decode(tok.encode(text)) == text.replace(" ", "")
        return
    bad = next(c for c in text if c not in vocab)
    with pytest.raises(ValueError, match=r"^character "):
        tok.encode(text)
    from abacus_ray.tasks import Problem

    with pytest.raises(ValueError, match=rf"^problems: character {re.escape(repr(bad))}"):
        encode_problems([Problem("12=", "21"), Problem(text + "=", "1")], tok)
    tally("problem strings: foreign characters", 2)


GEN_CASES = [  # (kwargs over a valid add cell, culprit)
    (st.builds(dict, task=_not_in(TASKS)), "task"),
    (st.builds(dict, i=st.integers(max_value=0) | st.floats() | st.text(max_size=3) | st.booleans()), "i"),
    (st.builds(dict, j=st.integers(max_value=0) | st.floats() | st.none()), "j"),
    (st.builds(dict, count=st.integers(max_value=0) | st.floats() | st.text(max_size=3)), "count"),
    (st.builds(dict, seed=st.floats() | st.text(max_size=3) | st.none() | st.booleans()), "seed"),
    (st.builds(dict, index_hints=_not_in(("none", "cyclic", "noncyclic"))), "index_hints"),
    (st.builds(dict, pad_p=NEGATIVE | st.floats(min_value=1) | st.just(math.nan) | st.text(max_size=3)), "pad_p"),
    (st.builds(dict, hint_start=st.integers(max_value=-1) | st.integers(min_value=102), index_hints=st.just("cyclic")),
     "hint_start"),
    (st.builds(dict, task=st.sampled_from(["mul", "sort", "or"]), index_hints=st.just("cyclic")), "index_hints"),
    (st.builds(dict, task=st.just("sort"), j=st.integers(len(SORT_LABELS) + 1, 10**6)), "j"),
    (st.builds(dict, i=st.integers(102, 10**5), index_hints=st.just("noncyclic")), ("i", "j")),
]


@FUZZ
@given(case=st.sampled_from(GEN_CASES), data=st.data(), through=st.sampled_from(["generate", "eval_problems"]))
def test_problem_generators_refuse_bad_arguments(case, data, through):
    strategy, culprit = case
    kwargs = {"task": "add", "i": 3, "j": 4, "count": 5, "seed": 0} | data.draw(strategy)
    positional = [kwargs.pop(k) for k in ("task", "i", "j", "count", "seed")]
    fn = generate if through == "generate" else eval_problems
    with pytest.raises(ValueError) as e:
        fn(*positional, **kwargs)
    culprits = (culprit,) if isinstance(culprit, str) else culprit
    assert str(e.value).startswith(tuple(f"{c}:" for c in culprits)), str(e.value)
    tally("problem generator arguments")


def test_unknown_eval_set_variant():
    with pytest.raises(ValueError, match=r"^colour: unknown eval-set variant"):
        eval_problems("add", 2, 2, 3, 0, colour="red")
    tally("problem generator arguments")


# --- 6. evaluation lengths beyond the Abacus table -----------------------------------------------------

@FUZZ
@given(n=st.integers(127, grids_mod.MAX_LENGTH), flag=st.sampled_from(["--diagonal", "--cells"]))
def test_addition_lengths_beyond_the_abacus_table(n, flag, ckpt, work):
    spec = str(n) if flag == "--diagonal" else f"1-3x{n}"
    out = work / "never-written"
    message = assert_refused(["eval", str(ckpt), "--out", str(out), "--quiet", flag, spec], "model.abacus_table",
                             "eval lengths beyond the Abacus table", roots=[work])
    assert "has 128" in message
    assert not out.exists()


@FUZZ
@given(i=st.integers(1, 3000), j=st.integers(1, 3000))
def test_multiplication_lengths_beyond_the_abacus_table(i, j, mul_ckpt, work):
    if i + j + 1 <= 40:  # fits: i + j digits in the product, plus row 0
        return
    out = work / "never-written"
    assert_refused(["eval", str(mul_ckpt), "--out", str(out), "--quiet", "--cells", f"{i}x{j}"], "model.abacus_table",
                   "eval lengths beyond the Abacus table", roots=[work])


@pytest.mark.parametrize("grid", ["paper-addition", "paper-addition-long", "diagonal:101-160"])
def test_named_grids_beyond_the_abacus_table(grid, ckpt, work):
    assert_refused(["eval", str(ckpt), "--out", str(work / "never-written"), "--quiet", "--grid", grid],
                   "model.abacus_table", "eval lengths beyond the Abacus table", roots=[work])
