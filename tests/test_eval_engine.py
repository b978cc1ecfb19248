"""The three exact-match engines agree problem by problem (teacher-forced, KV-cache, naive greedy).

Random models are almost always wrong, so "correct" is exercised by scoring a model's *own* greedy
output as the target (every engine must then say correct), and first-wrong positions by corrupting one
token of such a target. A briefly trained model checks the same on real problems.
"""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from abacus_ray.evaluation.decoding import greedy_kv, greedy_naive, greedy_per_recurrence, match
from abacus_ray.evaluation.engine import PreparedCell, decode_limit, prepare_cell, run_cells
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.noise import cell_noise, cell_seed
from abacus_ray.evaluation.teacher_forcing import score_teacher_forced
from abacus_ray.model import ArithmeticTransformer, ModelConfig
from abacus_ray.model.config import POSITIONS
from abacus_ray.tasks.config import TaskConfig
from abacus_ray.tasks.evalsets import eval_problems
from abacus_ray.tasks.formats import Problem
from abacus_ray.tasks.stream import TrainStream, encode_problems
from abacus_ray.tasks.tokenizer import EOS, get_tokenizer

ENGINES = ("teacher", "kv", "naive")
# small cells per task; sorting's prompt length varies inside a cell, so KV groups split cells
TASK_CELLS = {
    "add": [(1, 2), (3, 3), (4, 2)],
    "sub": [(2, 1), (3, 3)],
    "mul": [(1, 1), (2, 3)],
    "or": [(2, 3), (4, 4)],
    "sort": [(1, 2), (2, 3)],
}


def tokenizer_for(task: str):
    return get_tokenizer("sort" if task == "sort" else "pad")


def build(positions: str = "abacus", *, layers=1, recurrences=2, injection="every", seed=0, hidden=16,
          vocab=19, init_state="noise", eos_bias=0.0) -> ArithmeticTransformer:
    torch.manual_seed(seed)
    cfg = ModelConfig(positions=positions, layers=layers, recurrences=recurrences, injection=injection,
                      hidden=hidden, intermediate=2 * hidden, heads=2, max_k=4, abacus_table=48,
                      init_state=init_state, init_std=0.5)
    model = ArithmeticTransformer(cfg, vocab).eval()
    if eos_bias:  # make EOS win often enough that greedy outputs of random models stop
        with torch.no_grad():
            model.decoder.weight[EOS] *= eos_bias
    return model


def prepared(task: str, cells, count=4, seed=0) -> list[PreparedCell]:
    tok = tokenizer_for(task)
    return [prepare_cell(Cell(task, i, j), eval_problems(task, i, j, count, seed), tok, seed) for i, j in cells]


def verdicts(outcomes):
    return [(o.cell, o.correct, o.first_wrong, o.first_correct) for o in outcomes]


def run_all(model, cells, **kw):
    return {e: run_cells(model, cells, engine=e, token_budget=kw.pop("budget", 96), **kw) for e in ENGINES}


def self_targets(model, cells: list[PreparedCell], corrupt_at: int | None = None) -> list[PreparedCell]:
    """The cells with each answer replaced by the model's own KV-greedy output (stopped rows only).

    `corrupt_at=k` changes answer token k (or the EOS when k == len) so the first wrong position is k.
    """
    kv = run_cells(model, cells, engine="kv", token_budget=10_000)
    out = []
    for cell, o in zip(cells, kv):
        tok = cell.tokenizer
        probs = []
        for r, (prompt, pred, stopped) in enumerate(zip(cell.prompts_text, o.predictions, o.stopped)):
            if not stopped or any(ch in " ?" for ch in pred):
                continue
            ans = pred
            if corrupt_at is not None:
                if corrupt_at >= len(ans):
                    continue
                ch = ans[corrupt_at]
                ans = ans[:corrupt_at] + ("5" if ch != "5" else "6") + ans[corrupt_at + 1:]
            probs.append(Problem(prompt, ans))
        if probs:
            out.append(prepare_cell(cell.cell, probs, tok, 0))
    return out


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("task", list(TASK_CELLS))
def test_engines_agree_per_problem_on_random_models(task, positions):
    vocab = tokenizer_for(task).vocab_size
    model = build(positions, vocab=vocab, seed=hash((task, positions)) % 1000)
    cells = prepared(task, TASK_CELLS[task])
    res = run_all(model, cells, require_eos=task != "sort")
    assert verdicts(res["teacher"]) == verdicts(res["kv"]) == verdicts(res["naive"])
    assert res["kv"][0].predictions == res["naive"][0].predictions


@pytest.mark.parametrize("positions", ["abacus", "fire", "rope", "abacus+fire"])
@pytest.mark.parametrize("task", ["add", "mul", "sort"])
def test_own_greedy_output_is_scored_correct_by_every_engine(task, positions):
    vocab = tokenizer_for(task).vocab_size
    model = build(positions, vocab=vocab, seed=7, eos_bias=2.5, layers=2, recurrences=2, injection="first")
    cells = self_targets(model, prepared(task, TASK_CELLS[task], count=8))
    assert cells, "no greedy output stopped with EOS; raise eos_bias"
    for require_eos in (True, False):
        res = run_all(model, cells, require_eos=require_eos)
        for e in ENGINES:
            assert all(all(o.correct) for o in res[e]), (e, require_eos)
            assert all(fw == -1 for o in res[e] for fw in o.first_wrong)
            assert all(all(o.first_correct) for o in res[e])


@pytest.mark.parametrize("k", [0, 1])
def test_first_wrong_position_is_the_corrupted_token(k):
    model = build("abacus", seed=7, eos_bias=2.5)
    cells = self_targets(model, prepared("add", [(2, 2), (3, 3), (4, 4)], count=10), corrupt_at=k)
    assert cells
    res = run_all(model, cells)
    for e in ENGINES:
        assert [fw for o in res[e] for fw in o.first_wrong] == [k] * sum(o.n for o in res[e]), e
        assert all(not c for o in res[e] for c in o.correct)
        assert all(fc == (k != 0) for o in res[e] for fc in o.first_correct)


def test_sorting_ignores_the_eos_unless_required():
    model = build("abacus", vocab=118, seed=7, eos_bias=2.5)
    cells = self_targets(model, prepared("sort", [(1, 2), (2, 3)], count=8))
    # append one more label-like token to each target's text: the model stops before it
    longer = [prepare_cell(c.cell, [Problem(p, a[:-1]) for p, a in zip(c.prompts_text, c.answers_text) if a],
                           c.tokenizer, 0) for c in cells]
    longer = [c for c in longer if c.n]
    assert longer
    # a prefix target: the first len(a) tokens match, the EOS does not come next
    for e in ENGINES:
        lax = run_cells(model, longer, engine=e, require_eos=False)
        strict = run_cells(model, longer, engine=e, require_eos=True)
        assert all(all(o.correct) for o in lax), e
        assert not any(any(o.correct) for o in strict), e
        assert all(fw == len(a) for o, c in zip(strict, longer) for fw, a in zip(o.first_wrong, c.answers_text))


def test_packing_and_budget_do_not_change_verdicts():
    model = build("abacus+rope", seed=3, eos_bias=2.5)
    cells = prepared("add", [(1, 1), (2, 5), (5, 2), (6, 6)], count=6) + self_targets(
        model, prepared("add", [(3, 2)], count=6))
    base = verdicts(run_cells(model, cells, engine="teacher", token_budget=10_000))
    for budget in (1, 17, 200):
        for e in ENGINES:
            assert verdicts(run_cells(model, cells, engine=e, token_budget=budget)) == base, (e, budget)
    # scoring a cell alone gives the same verdicts as scoring it among others
    alone = [verdicts(run_cells(model, [c], engine="teacher"))[0] for c in cells]
    assert alone == base


def test_noise_is_seeded_per_cell_and_reruns_reproduce():
    cfg = build("abacus").cfg
    a = cell_noise(cfg, cell_seed(0, "add", 3, 4), 4, 9, "cpu")
    assert torch.equal(a, cell_noise(cfg, cell_seed(0, "add", 3, 4), 4, 9, "cpu"))
    assert a.shape == (4, 9, cfg.hidden)
    assert abs(a.std().item() - cfg.init_std) < 0.15
    assert len({cell_seed(s, t, i, j) for s in (0, 1) for t in ("add", "sub") for i in (3, 4) for j in (3, 4)}) == 16
    zero_cfg = build("abacus", init_state="zeros").cfg
    assert cell_noise(zero_cfg, 1, 4, 9, "cpu") is None
    model = build("nope", seed=5)
    cells = prepared("add", [(3, 3), (5, 4)], count=5)
    first = run_cells(model, cells, engine="kv")
    again = run_cells(model, cells, engine="kv")
    assert [o.predictions for o in first] == [o.predictions for o in again]


def test_noise_changes_outputs_when_the_state_is_random():
    """The test above would pass trivially if noise were ignored; this one fails if it is."""
    model = build("nope", seed=5)
    loud = ArithmeticTransformer(dataclasses.replace(model.cfg, init_std=50.0), 19).eval()
    loud.load_state_dict(model.state_dict())
    cells = prepared("add", [(3, 3), (4, 4)], count=8)
    ids = torch.tensor(cells[0].prompts)
    n1 = cell_noise(loud.cfg, 1, ids.shape[0], ids.shape[1] + 6, "cpu")
    n2 = cell_noise(loud.cfg, 2, ids.shape[0], ids.shape[1] + 6, "cpu")
    assert not torch.equal(greedy_kv(loud, ids, 6, noise=n1), greedy_kv(loud, ids, 6, noise=n2))


def test_score_teacher_forced_on_a_stream_batch_matches_the_engine():
    model = build("abacus", seed=11, eos_bias=2.5)
    cells = self_targets(model, prepared("add", [(2, 3)], count=10)) + prepared("add", [(2, 3)], count=10)
    problems = [Problem(p, a) for c in cells for p, a in zip(c.prompts_text, c.answers_text)]
    batch = encode_problems(problems, get_tokenizer("pad"))
    noise = torch.cat([cell_noise(model.cfg, c.seed, c.n, c.noise_len, "cpu") for c in cells])
    noise = torch.nn.functional.pad(noise, (0, 0, 0, max(0, batch.input_ids.shape[1] - noise.shape[1])))
    correct, first_wrong = score_teacher_forced(model, batch, noise=noise[:, :batch.input_ids.shape[1]])
    engine = run_cells(model, cells, engine="teacher")
    assert correct.tolist() == [c for o in engine for c in o.correct]
    assert first_wrong.tolist() == [f for o in engine for f in o.first_wrong]
    assert correct.dtype == torch.bool and first_wrong.dtype == torch.long
    assert correct.any() and not correct.all()


def test_per_recurrence_decoding_ends_in_the_greedy_output():
    model = build("abacus", layers=1, recurrences=4, seed=2)
    cell = prepared("add", [(3, 3)], count=3)[0]
    ids = torch.tensor(cell.prompts)
    noise = cell_noise(model.cfg, cell.seed, cell.n, cell.noise_len, "cpu")
    per_r = greedy_per_recurrence(model, ids, 5, noise=noise)
    naive_r = greedy_per_recurrence(model, ids, 5, noise=noise, use_cache=False)
    assert per_r.shape[:2] == (4, 3)
    assert torch.equal(per_r, naive_r)
    assert torch.equal(per_r[-1], greedy_kv(model, ids, 5, noise=noise))
    assert torch.equal(per_r[-1], greedy_naive(model, ids, 5, noise=noise))
    two = greedy_per_recurrence(model, ids, 5, noise=noise, recurrences=2)
    assert two.shape[0] == 2


def test_match_cuts_each_row_at_its_own_limit():
    gen = torch.tensor([[5, 6, EOS, 9], [5, 6, 7, EOS]])
    m = match(gen, [[5, 6, EOS], [5, 6, EOS]], [4, 2])
    assert m.correct == [True, False] and m.first_wrong == [-1, 2]
    assert m.stopped == [True, False] and m.predictions == [[5, 6], [5, 6]]
    assert decode_limit("add", 4) == 7 and decode_limit("sort", 4) == 10


def test_briefly_trained_model_engines_agree_and_some_problems_are_right():
    torch.manual_seed(0)
    cfg = ModelConfig(positions="abacus", layers=1, recurrences=2, hidden=32, intermediate=64, heads=2,
                      max_k=2, abacus_table=16)
    model = ArithmeticTransformer(cfg, 19)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    stream = TrainStream(TaskConfig(name="add", train_max_len=1), 0)
    for step in range(60):  # 1-digit addition: 81 problems, learnable in seconds
        b = stream.batch(step, 64)
        logits = model(b.input_ids[:, :-1])
        tgt = b.input_ids[:, 1:].masked_fill(~b.target_mask[:, 1:], -100)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    cells = prepared("add", [(1, 1), (1, 2), (2, 1)], count=30)
    res = run_all(model, cells)
    assert verdicts(res["teacher"]) == verdicts(res["kv"]) == verdicts(res["naive"])
    assert res["teacher"][0].n_correct > 0
    for o, c in zip(res["kv"], cells):  # independent check with Python ints
        for prompt, pred, stopped, ok in zip(c.prompts_text, o.predictions, o.stopped, o.correct):
            a, b = prompt[:-1].split("+")
            assert ok == (stopped and pred.isdigit() and int(pred[::-1]) == int(a[::-1]) + int(b[::-1]))
