"""The audit's fidelity items (issue 17, docs/fidelity.md): each test fails on the code before the fix.

* index-hint scoring: the official rule (digits only, hints dropped, twice the answer field) by
  default, the strict rule as an option, both named in every results row;
* bitwise-OR training data: pairs weighted by min(i, j), as the official exhaustive set;
"""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from abacus_ray.config import TaskConfig, preset
from abacus_ray.config.evaluation import EvalConfig
from abacus_ray.evaluation.decoding import match
from abacus_ray.evaluation.engine import prepare_cell, run_cells
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.plan import settings_for
from abacus_ray.evaluation.runner import score_cells
from abacus_ray.tasks.evalsets import eval_problems
from abacus_ray.tasks.stream import TrainStream
from abacus_ray.tasks.tokenizer import HINT_SYMBOLS, get_tokenizer
from tests.test_eval_runner import FlawedOracle, true_answer

HINT_TOK = get_tokenizer("index")


# --- index-hint scoring ----------------------------------------------------------------------------

def test_official_hint_rule_scores_digits_and_ignores_the_hint_symbols():
    """6 + 49 = 55, written with hints as "e5f5" (reversed): hand-made outputs under both rules."""
    target = HINT_TOK.encode("e5f5", eos=True)
    limit = 2 * len(target)  # the official eval generates up to twice the answer field

    def verdicts(text: str, eos: bool = True) -> tuple[bool, bool]:
        ids = torch.tensor([HINT_TOK.encode(text, eos=eos)])
        official = match(ids, [target], [limit], drop_above=HINT_TOK.equals_id).correct[0]
        strict = match(ids, [target], [len(target) + 2]).correct[0]
        return official, strict

    assert verdicts("e5f5") == (True, True)
    assert verdicts("A5B5") == (True, False)  # wrong hints, right digits
    assert verdicts("55") == (True, False)  # no hints at all
    assert verdicts("e5f5g1") == (False, False)  # an extra digit
    assert verdicts("e5f6") == (False, False)  # a wrong digit
    assert verdicts("e5f5", eos=False) == (False, False)  # never stops
    assert verdicts("e5") == (False, False)  # early EOS


class HintOracle(FlawedOracle):
    """Answers with hint symbols, like a Fig. 21 model, but with two flaws: the result r + 1 whenever
    r is divisible by 3, and hints shifted by one symbol whenever r is even."""

    def __init__(self):
        super().__init__()
        self.vocab_size = HINT_TOK.vocab_size
        self.chars = HINT_TOK.id_to_char()

    def answer_ids(self, prompt: str) -> list[int]:
        r = true_answer("".join(ch for ch in prompt if ch in "0123456789+="))
        shift = 1 if r % 2 == 0 else 0
        r = r + 1 if r % 3 == 0 else r
        digits = str(r)[::-1]
        return HINT_TOK.encode("".join(HINT_SYMBOLS[t + shift] + d for t, d in enumerate(digits)), eos=True)


def test_hinted_models_are_scored_officially_by_default_and_strictly_on_request():
    cfg = preset("tiny", ["task.index_hints=cyclic"])
    official, strict = EvalConfig(per_cell=30, seed=1), EvalConfig(per_cell=30, seed=1, hint_scoring="strict")
    assert EvalConfig().hint_scoring == "official"
    s = settings_for(cfg, official, "cpu", "add")
    assert (s.scoring, s.engine) == ("digits", "kv")  # the digits rule needs the model's own output
    assert settings_for(cfg, strict, "cpu", "add").scoring == "exact"
    assert settings_for(preset("tiny"), official, "cpu", "add").scoring == "exact"  # no hints: nothing changes

    ckpt = SimpleNamespace(model=HintOracle().eval(), config=cfg, model_id="hints", path="memory")
    cells = [Cell("add", 3, 2), Cell("add", 7, 7)]
    rows, samples = score_cells(ckpt, cells, official, samples=True)
    strict_rows, _ = score_cells(ckpt, cells, strict)
    for r, sr in zip(rows, strict_rows, strict=True):
        assert (r["scoring"], sr["scoring"]) == ("digits", "exact")
        mine = [s for s in samples if (s["i"], s["j"]) == (r["i"], r["j"])]
        truths = [true_answer("".join(ch for ch in s["prompt"] if ch in "0123456789+=")) for s in mine]
        assert r["n_correct"] == sum(t % 3 != 0 for t in truths)  # only the digit flaw counts
        assert sr["n_correct"] == sum(t % 3 != 0 and t % 2 == 1 for t in truths)  # hints count too
        assert 0 < sr["n_correct"] < r["n_correct"] < r["n"]
        assert all(s["scoring"] == "digits" for s in mine)


def test_teacher_forcing_refuses_the_digits_rule():
    prepared = prepare_cell(Cell("add", 2, 2), eval_problems("add", 2, 2, 4, 0, index_hints="cyclic"), HINT_TOK, 0, "digits")
    assert prepared.max_new == 2 * max(len(t) for t in prepared.targets)  # the answer field, twice
    with pytest.raises(ValueError, match="^eval.engine: teacher forcing"):
        run_cells(HintOracle(), [prepared], engine="teacher")


# --- bitwise-OR training distribution --------------------------------------------------------------

def test_or_stream_weighs_each_length_pair_as_the_exhaustive_set_does():
    """Size-20 OR data (paper A.3): the exhaustive set holds min(i, j) problems per pair, 2,870 in all,
    so min(i, j) >= 15 is 20.7 % of it; a stream with one sample per pair gave 8.7 %."""
    stream = TrainStream(TaskConfig(name="or", train_max_len=20), seed=0)
    assert stream.num_pairs == sum(min(i, j) for i in range(1, 21) for j in range(1, 21)) == 2870
    i, j = stream.pairs(0, 2870)  # one full pass
    counts = {}
    for a, b in zip(i.tolist(), j.tolist(), strict=True):
        counts[(a, b)] = counts.get((a, b), 0) + 1
    assert counts == {(a, b): min(a, b) for a in range(1, 21) for b in range(1, 21)}
    share = float((np.minimum(i, j) >= 15).mean())
    assert round(share, 3) == 0.207
    first = stream.pairs(0, 64)  # the first batch still mixes every length, as the layers interleave
    assert len(set(first[0].tolist())) >= 3 and len(set(first[1].tolist())) == 20
    problems = stream.problems(5, 300)  # and the problems are the pairs' one-hot problems
    for p, a, b in zip(problems, *stream.pairs(5, 300), strict=True):
        u, v = p.prompt[:-1].split("+")
        assert (len(u), len(v), len(p.answer)) == (a, b, max(a, b)) and p.answer.count("1") == 1
