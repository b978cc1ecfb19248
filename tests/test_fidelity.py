"""The audit's fidelity items (docs/fidelity.md): each test fails on the code before the fix.

* index-hint scoring: the official rule (digits only, hints dropped, twice the unhinted answer field) by
  default, the strict rule as an option, both named in every results row;
* bitwise-OR training data: pairs weighted by min(i, j), as the official exhaustive set;
* budgets: the paper's compute per figure in A4000-hours of model FLOPs, the same samples and steps
  on any hardware and any number of workers, and stated in words before a sweep runs;
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
from abacus_ray.evaluation.runner import score_cells
from abacus_ray.evaluation.work import settings_for
from abacus_ray.storage import on_disk
from abacus_ray.tasks.evalsets import eval_problems
from abacus_ray.tasks.stream import TrainStream
from abacus_ray.tasks.tokenizer import HINT_SYMBOLS, get_tokenizer
from abacus_ray.training import budget as budget_module
from abacus_ray.training.budget import A4000_HOUR_FLOPS, budget_terms, sample_flops
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
    digits = max(len([t for t in target if t <= HINT_TOK.equals_id]) for target in prepared.targets)  # EOS included
    assert prepared.max_new == 2 * digits  # the unhinted answer field, twice (arithmetic_eval_quicker.py)
    with pytest.raises(ValueError, match="^eval.engine: teacher forcing"):
        run_cells(HintOracle(), [prepared], engine="teacher")



class ChattyHintOracle(FlawedOracle):
    """Right digits, right hints, but two extra hint symbols before the answer: 2 d + 3 tokens with EOS."""

    def __init__(self):
        super().__init__()
        self.vocab_size = HINT_TOK.vocab_size
        self.chars = HINT_TOK.id_to_char()

    def answer_ids(self, prompt: str) -> list[int]:
        digits = str(true_answer("".join(ch for ch in prompt if ch in "0123456789+=")))[::-1]
        hinted = "".join(HINT_SYMBOLS[t] + d for t, d in enumerate(digits))
        return HINT_TOK.encode(HINT_SYMBOLS[50] + HINT_SYMBOLS[51] + hinted, eos=True)


def test_the_official_hint_limit_cuts_an_over_long_output():
    """The official eval generates 2 x (unhinted digits + EOS) tokens for a hinted model
    (arithmetic_eval_quicker.py, `token_limit=(tokenized_answers.shape[1]*2)`), then drops the hints:
    in cell 3 x 2 (answers of 3 or 4 digits, limit 2 x 5 = 10) a 4-digit answer with two extra
    symbols needs 11 tokens, loses its EOS and is wrong; a 3-digit one needs 9 and is right. Twice
    the hinted field (our earlier limit, 18) would have let every one through."""
    cfg = preset("tiny", ["task.index_hints=cyclic"])
    ckpt = SimpleNamespace(model=ChattyHintOracle().eval(), config=cfg, model_id="chatty", path="memory")
    rows, samples = score_cells(ckpt, [Cell("add", 3, 2)], EvalConfig(per_cell=40, seed=5), samples=True)
    digits = [len(str(true_answer("".join(ch for ch in s["prompt"] if ch in "0123456789+=")))) for s in samples]
    assert set(digits) == {3, 4}
    assert [s["correct"] for s in samples] == [d == 3 for d in digits]
    assert [s["stopped"] for s in samples] == [d == 3 for d in digits]
    assert rows[0]["n_correct"] == digits.count(3)

# --- bitwise-OR training distribution --------------------------------------------------------------

def test_or_stream_weighs_each_length_pair_as_the_exhaustive_set_does():
    """Size-20 OR data (paper A.3): the exhaustive set holds min(i, j) problems per pair, 2,870 in all,
    so min(i, j) >= 15 is 20.7 % of it; a stream with one sample per pair gave 36 / 400 = 9.0 %."""
    stream = TrainStream(TaskConfig(name="or", train_max_len=20), seed=0)
    assert stream.num_pairs == sum(min(i, j) for i in range(1, 21) for j in range(1, 21)) == 2870
    i, j = stream.pairs(0, 2870)  # one full pass
    counts = {}
    for a, b in zip(i.tolist(), j.tolist(), strict=True):
        counts[(a, b)] = counts.get((a, b), 0) + 1
    assert counts == {(a, b): min(a, b) for a in range(1, 21) for b in range(1, 21)}
    share = float((np.minimum(i, j) >= 15).mean())
    assert round(share, 3) == 0.207
    uniform = np.array([min(a, b) >= 15 for a in range(1, 21) for b in range(1, 21)]).mean()
    assert round(float(uniform), 3) == 0.090  # the old weighting, one sample per pair (docs/fidelity.md)
    first = stream.pairs(0, 64)  # the first batch still mixes every length, as the layers interleave
    assert len(set(first[0].tolist())) >= 3 and len(set(first[1].tolist())) == 20
    problems = stream.problems(5, 300)  # and the problems are the pairs' one-hot problems
    for p, a, b in zip(problems, *stream.pairs(5, 300), strict=True):
        u, v = p.prompt[:-1].split("+")
        assert (len(u), len(v), len(p.answer)) == (a, b, max(a, b)) and p.answer.count("1") == 1


# --- budgets ---------------------------------------------------------------------------------------

def test_every_paper_sweep_budget_is_the_papers_compute_for_its_figure():
    """Table 4: addition and sorting 24 A4000-hours, bitwise OR 1 (the "FF w/ II" shell 24),
    multiplication 192 (8 GPUs x 24 h), whatever the number of workers."""
    from abacus_ray.api.sweeps import load_sweep
    from abacus_ray.sweep import Sweep
    expected = {"mul": {192.0}, "or": {1.0, 24.0}}
    for name in ("fig3_embeddings", "fig4_depth_recurrence", "fig6_multiplication", "fig7_relative",
                 "fig8_bitwise_or", "fig10_k", "table1_sorting"):
        sweep: Sweep = load_sweep(name)
        for t in sweep.expand("paper"):
            tc = t.config.train
            assert tc.budget_hours is None, t.name  # no wall-clock limit: the same compute on any GPU
            assert tc.budget_a4000_hours in expected.get(t.config.task.name, {24.0}), t.name
    mul = load_sweep("fig6_multiplication").expand("paper")[0].config
    assert mul.cluster.workers == 8
    one = budget_terms(mul.with_overrides({"cluster.workers": 1}), 1)
    eight = budget_terms(mul, 8)
    assert eight["samples"] == one["samples"]  # eight workers train what one would, not an eighth
    assert eight["model_flops"] == pytest.approx(192 * A4000_HOUR_FLOPS, rel=1e-6)


def test_dry_run_states_the_budget_in_samples_steps_and_hours(tmp_path, capsys):
    import json

    from abacus_ray.cli import main
    assert main(["sweep", "fig6_multiplication", "--dry-run", "--preset", "paper", "--storage", str(tmp_path)]) == 0
    trial = json.loads(capsys.readouterr().out)["trials"][0]
    b = trial["budget"]
    assert b["a4000_hours"] == 192 and b["workers"] == 8 and b["samples"] > 1e8 and b["optimizer_steps"] > 1e4
    assert b["device_hours"] is None and b["wall_hours"] is None
    assert main(["sweep", "fig6_multiplication", "--dry-run", "--preset", "paper", "--storage", str(tmp_path),
                 "--budget-hours", "24"]) == 0
    b = json.loads(capsys.readouterr().out)["trials"][0]["budget"]
    assert (b["device_hours"], b["wall_hours"]) == (24, 3)  # 24 device-hours on 8 workers: 3 wall-hours


def _a4000_config(samples: int, **extra):
    base = preset("tiny", {"model.hidden": 32, "model.intermediate": 64, "model.heads": 2, "train.micro_batch": 8,
                           "train.global_batch": 32, "train.batch_ramp": 0.6, "train.max_steps": None,
                           "train.budget_hours": None, "train.budget_a4000_hours": 1.0,
                           "train.report_every_s": 1e-9})
    hours = samples * sample_flops(base) / A4000_HOUR_FLOPS
    return base.with_overrides({"train.budget_a4000_hours": hours, **extra})


def test_a4000_budget_trains_the_same_samples_steps_and_weights_on_fast_and_slow_hardware(monkeypatch):
    from abacus_ray.training.loop import train
    cfg = _a4000_config(400)
    expected = budget_terms(cfg)
    assert 390 <= expected["samples"] <= 400 and expected["optimizer_steps"] > 1
    fast = train(cfg)
    clock = iter(range(0, 10**9, 3600))  # every clock reading an hour later: a very slow device
    monkeypatch.setattr(budget_module, "time", type("Clock", (), {"perf_counter": staticmethod(lambda: next(clock))}))
    slow = train(cfg)
    for run in (fast, slow):
        assert run.metrics["step"] == expected["optimizer_steps"]
        assert run.metrics["samples"] >= expected["samples"] > run.metrics["samples"] - 32
    assert slow.model_id == fast.model_id and slow.losses == fast.losses  # the same training, bit for bit
    hours = train(cfg.with_overrides({"train.budget_hours": 2.5}))  # a wall-clock limit on that slow device
    assert hours.metrics["step"] < expected["optimizer_steps"]  # stops early: hardware decides the training


# --- per-architecture micro-batch and Fig. 8's models ----------------------------------------------

def _micro_batches(name: str) -> dict[tuple, set[int]]:
    from abacus_ray.api.sweeps import load_sweep
    out: dict[tuple, set[int]] = {}
    for t in load_sweep(name).expand("paper"):
        m = t.config.model
        key = (m.layers, m.recurrences, m.injection, m.positions, t.config.train.budget_a4000_hours)
        out.setdefault(key, set()).add(t.config.train.micro_batch)
    return out


def test_micro_batches_are_the_official_shells():
    """docs/official-code.md §6.10: 256 for the addition ST, the Fig. 7 Abacus combinations and the OR
    "FF" shells, 512 for ST w/ II and LT."""
    for key, mbs in _micro_batches("fig3_embeddings").items():
        assert mbs == ({256} if key[2] == "first" else {512}), key
    fig7 = {key[3]: mbs for key, mbs in _micro_batches("fig7_relative").items()}
    assert fig7 == {"abacus+fire": {256}, "abacus+rope": {256}, "fire": {512}, "rope": {512}}


def test_fig8_trains_the_models_of_the_official_or_shells():
    """No OR shell trains an ST without injection: "ST" is the FF shell (skip flag, 1 A4000-hour),
    "ST w/ II" the FF w/ II shell (24 A4000-hours); LT 1 x 16 with micro-batch 512."""
    models = _micro_batches("fig8_bitwise_or")
    shapes = {(L, R, inj, budget): mbs for (L, R, inj, _pos, budget), mbs in models.items()}
    assert shapes == {(1, 16, "every", 1.0): {512}, (16, 1, "every", 1.0): {256}, (16, 1, "every", 24.0): {256}}
    assert {pos for (*_, pos, _b) in models} == {"abacus", "fire", "nope"}


# --- precision ---------------------------------------------------------------------------------------

def test_tf32_is_a_named_precision_and_cpu_runs_it_as_fp32():
    from abacus_ray.config.train import resolved_precision
    from abacus_ray.model.precision import resolve_precision
    assert resolved_precision("tf32", "cuda") == "tf32" and resolved_precision("tf32", "cpu") == "fp32"
    assert resolve_precision("tf32", "cpu", "eval.precision").name == "fp32"  # rows record what ran
    assert EvalConfig(precision="tf32").precision == "tf32"


def test_precision_verdicts_counts_flips_in_both_directions(tmp_path, capsys):
    """The measuring script behind docs/fidelity.md's precision numbers, on a briefly trained model."""
    from abacus_ray.model.checkpoint import save_checkpoint
    from abacus_ray.model.transformer import ArithmeticTransformer
    from benchmarks.precision_verdicts import compare, main
    assert compare({(1, 1): [True, False, True]}, {(1, 1): [False, True, True]}) == [
        {"i": 1, "j": 1, "n": 3, "right_ref": 2, "right": 2, "changed": 2}]  # equal accuracy, two flips
    cfg = preset("tiny")
    save_checkpoint(on_disk(tmp_path / "ckpt"), ArithmeticTransformer.for_experiment(cfg), cfg, {"step": 0})
    assert main([str(tmp_path / "ckpt"), "--grid", "cells:1-2x1-2", "--per-cell", "5", "--precisions", "fp32", "bf16",
                 "tf32", "--csv", str(tmp_path / "c.csv")]) == 0
    out = capsys.readouterr().out
    assert "4 cells, 20 problems" in out and "tf32: runs as fp32 on cpu" in out
    assert "bf16: " in out and "verdicts changed" in out and (tmp_path / "c.csv").exists()
