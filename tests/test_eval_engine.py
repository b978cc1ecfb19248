"""The three exact-match engines agree problem by problem (teacher-forced, KV-cache, naive greedy).

Random models are almost always wrong, so "correct" is exercised by scoring a model's *own* greedy
output as the target (every engine must then say correct), and first-wrong positions by corrupting one
token of such a target. A briefly trained model checks the same on real problems.
"""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from example_plugin import ALL_POSITIONS

from abacus_ray.config.task import TaskConfig
from abacus_ray.evaluation.decoding import greedy_kv, greedy_naive, greedy_per_recurrence, match
from abacus_ray.evaluation.engine import (
    PreparedCell,
    decode_limit,
    predictions_per_recurrence,
    prepare_cell,
    run_cells,
)
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.noise import cell_noise
from abacus_ray.evaluation.teacher_forcing import score_teacher_forced
from abacus_ray.model import ArithmeticTransformer, ModelConfig
from abacus_ray.seeds import cell_seed
from abacus_ray.tasks.evalsets import eval_problems
from abacus_ray.tasks.formats import Problem
from abacus_ray.tasks.stream import TrainStream, encode_problems
from abacus_ray.tasks.tokenizer import EOS, get_tokenizer

ENGINES = ("teacher", "kv", "naive")
SPACE_ID = 18  # the never-emitted space id of every vocabulary (docs/official-code.md §1.1)
# small cells per task; sorting's prompt length varies inside a cell, so KV groups split cells
TASK_CELLS = {
    "add": [(1, 2), (3, 3), (4, 2)],
    "sub": [(2, 1), (3, 3)],
    "mul": [(1, 1), (2, 3)],
    "or": [(2, 3), (4, 4)],
    "sort": [(1, 2), (2, 3)],
    "add3": [(1, 2), (3, 2)],  # a plugin's task (examples/add3.py)
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


class StopAfter(torch.nn.Module):
    """A random model that never emits PAD/UNK/BOS/space and emits EOS right after it has emitted `trigger`.

    Its logits get -100 on the three specials everywhere, and +100 on EOS at every position whose
    input token is `trigger`: a function of each position's own logits and token, so it stays causal
    and identical under full forwards and a KV cache, while greedy outputs become printable and stop.
    """

    def __init__(self, inner: ArithmeticTransformer, trigger: int | None):
        super().__init__()
        self.inner, self.trigger = inner, trigger
        self.cfg, self.vocab_size = inner.cfg, inner.vocab_size

    def new_cache(self):
        return self.inner.new_cache()

    def forward(self, input_ids, **kw):
        logits = self.inner(input_ids, **kw).clone()
        logits[..., :EOS] -= 100.0
        logits[..., SPACE_ID] -= 100.0
        if self.trigger is not None:
            boost = 100.0 * (input_ids == self.trigger).to(logits.dtype)
            logits[..., EOS] += boost if logits.dim() == 3 else boost[None]
        return logits


def stopping_model(positions: str, cells: list[PreparedCell], **kw) -> StopAfter:
    """`build(...)` wrapped so that the most frequent token of its greedy outputs ends the answer."""
    inner = build(positions, **kw)
    seen = [ch for o in run_cells(StopAfter(inner, None), cells, engine="kv", token_budget=10_000)
            for p in o.predictions for ch in p]
    assert seen, "every greedy output is empty"
    trigger = cells[0].tokenizer.token_id(max(sorted(set(seen)), key=seen.count))
    return StopAfter(inner, trigger).eval()


def prepared(task: str, cells, count=4, seed=0) -> list[PreparedCell]:
    tok = tokenizer_for(task)
    return [prepare_cell(Cell(task, i, j), eval_problems(task, i, j, count, seed), tok, seed) for i, j in cells]


def verdicts(outcomes):
    return [(o.cell, o.correct, o.first_wrong, o.first_correct) for o in outcomes]


def run_all(model, cells, **kw):
    return {e: run_cells(model, cells, engine=e, token_budget=kw.pop("budget", 96), **kw) for e in ENGINES}


def self_targets(model, cells: list[PreparedCell], corrupt_at: int | None = None):
    """The cells with each answer replaced by the model's own KV-greedy output, and which rows that was.

    Rows whose greedy output did not stop (or holds a special token) keep their answer and are not
    selected. Seed, noise length and decoding limit are kept, so every row keeps its noise.
    `corrupt_at=k` changes answer token k so the first wrong position is k.
    """
    kv = run_cells(model, cells, engine="kv", token_budget=10_000)
    out, selected = [], []
    for cell, o in zip(cells, kv, strict=True):
        answers, sel = list(cell.answers_text), []
        for r, (pred, stopped) in enumerate(zip(o.predictions, o.stopped, strict=True)):
            usable = stopped and not any(ch in " \ufffd" for ch in pred)
            if usable and corrupt_at is not None:
                usable = corrupt_at < len(pred)
                if usable:
                    ch = pred[corrupt_at]
                    pred = pred[:corrupt_at] + ("5" if ch != "5" else "6") + pred[corrupt_at + 1:]
            if usable:
                answers[r] = pred
            sel.append(usable)
        out.append(dataclasses.replace(cell, answers_text=answers,
                                       targets=[cell.tokenizer.encode(a, eos=True) for a in answers]))
        selected.append(sel)
    assert any(any(s) for s in selected), "no usable greedy output stopped with EOS"
    return out, selected


def picked(outcomes, selected, attr):
    return [v for o, sel in zip(outcomes, selected, strict=True) for v, s in zip(getattr(o, attr), sel, strict=True) if s]


@pytest.mark.parametrize("positions", ALL_POSITIONS)
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
    cells = prepared(task, TASK_CELLS[task], count=8)
    model = stopping_model(positions, cells, vocab=vocab, seed=7, layers=2, recurrences=2, injection="first")
    cells, sel = self_targets(model, cells)
    for require_eos in (True, False):
        res = run_all(model, cells, require_eos=require_eos)
        assert verdicts(res["teacher"]) == verdicts(res["kv"]) == verdicts(res["naive"])
        for e in ENGINES:
            assert all(picked(res[e], sel, "correct")), (e, require_eos)
            assert set(picked(res[e], sel, "first_wrong")) == {-1}
            if require_eos:  # (without the EOS an empty answer has no first token to be right about)
                assert all(picked(res[e], sel, "first_correct"))


@pytest.mark.parametrize("k", [0, 1])
def test_first_wrong_position_is_the_corrupted_token(k):
    cells = prepared("add", [(2, 2), (3, 3), (4, 4)], count=10)
    model = stopping_model("abacus", cells, seed=7)
    cells, sel = self_targets(model, cells, corrupt_at=k)
    res = run_all(model, cells)
    for e in ENGINES:
        assert set(picked(res[e], sel, "first_wrong")) == {k}, e
        assert not any(picked(res[e], sel, "correct"))
        assert set(picked(res[e], sel, "first_correct")) == {k != 0}


def test_sorting_ignores_the_eos_unless_required():
    cells = prepared("sort", [(1, 2), (2, 3)], count=8)
    model = stopping_model("abacus", cells, vocab=118, seed=7)
    cells, sel = self_targets(model, cells)
    # drop the last answer token: the first len(a) tokens still match, but EOS does not come next
    cut = []
    for c, s in zip(cells, sel, strict=True):
        answers = [a[:-1] if keep and len(a) > 1 else a for a, keep in zip(c.answers_text, s, strict=True)]
        cut.append(dataclasses.replace(c, answers_text=answers, targets=[c.tokenizer.encode(a, eos=True) for a in answers]))
    sel = [[keep and len(a) > 1 for a, keep in zip(c.answers_text, s, strict=True)] for c, s in zip(cells, sel, strict=True)]
    assert any(any(s) for s in sel)
    for e in ENGINES:
        lax = run_cells(model, cut, engine=e, require_eos=False)
        strict = run_cells(model, cut, engine=e, require_eos=True)
        assert all(picked(lax, sel, "correct")), e
        assert not any(picked(strict, sel, "correct")), e
        want = [len(a) for c, s in zip(cut, sel, strict=True) for a, keep in zip(c.answers_text, s, strict=True) if keep]
        assert picked(strict, sel, "first_wrong") == want


def test_packing_and_budget_do_not_change_verdicts():
    own = prepared("add", [(3, 2)], count=6)
    model = stopping_model("abacus+rope", own, seed=3)
    cells = prepared("add", [(1, 1), (2, 5), (5, 2), (6, 6)], count=6) + self_targets(model, own)[0]
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
    own = prepared("add", [(2, 3)], count=10)
    model = stopping_model("abacus", own, seed=11)
    cells = self_targets(model, own)[0] + prepared("add", [(3, 2)], count=10)
    problems = [Problem(p, a) for c in cells for p, a in zip(c.prompts_text, c.answers_text, strict=True)]
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


@pytest.fixture(scope="module")
def trained():
    """A 1 x 2 looped model trained for 60 steps on 1-digit addition (81 problems, learnable in seconds)."""
    torch.manual_seed(0)
    cfg = ModelConfig(positions="abacus", layers=1, recurrences=2, hidden=32, intermediate=64, heads=2,
                      max_k=2, abacus_table=16)
    model = ArithmeticTransformer(cfg, 19)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    stream = TrainStream(TaskConfig(name="add", train_max_len=1), 0)
    for step in range(60):
        b = stream.batch(step, 64)
        logits = model(b.input_ids[:, :-1])
        tgt = b.input_ids[:, 1:].masked_fill(~b.target_mask[:, 1:], -100)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def test_briefly_trained_model_engines_agree_and_some_problems_are_right(trained):
    model = trained
    cells = prepared("add", [(1, 1), (1, 2), (2, 1)], count=30)
    res = run_all(model, cells)
    assert verdicts(res["teacher"]) == verdicts(res["kv"]) == verdicts(res["naive"])
    assert res["teacher"][0].n_correct > 0
    for o, c in zip(res["kv"], cells, strict=True):  # independent check with Python ints
        for prompt, pred, stopped, ok in zip(c.prompts_text, o.predictions, o.stopped, o.correct, strict=True):
            a, b = prompt[:-1].split("+")
            assert ok == (stopped and pred.isdigit() and int(pred[::-1]) == int(a[::-1]) + int(b[::-1]))


def test_pure_bf16_forward_keeps_the_fp32_verdicts(trained):
    """`eval.precision=bf16-pure`: weights, residual stream and norms in bf16, no fp32 copy.
    Its verdicts are compared with fp32 problem by problem, with bf16 autocast beside it."""
    from abacus_ray.model.precision import resolve_precision
    cells = prepared("add", [(1, 1), (1, 2), (2, 1), (2, 2)], count=50)
    def correct(precision):
        return [ok for o in run_cells(trained, cells, precision=precision) for ok in o.correct]

    ref = correct("fp32")
    assert 0 < sum(ref) < len(ref) == 200
    bf16 = resolve_precision("bf16-pure", "cpu", "eval.precision").model_for(trained)
    assert {p.dtype for p in bf16.parameters()} == {torch.bfloat16} and trained.tok.weight.dtype == torch.float32
    for precision in ("bf16-pure", "bf16"):
        flips = sum(a != b for a, b in zip(ref, correct(precision), strict=True))
        assert flips <= 2, (precision, flips)  # of 200 problems: at most 1 %
    assert resolve_precision("bf16-pure", "cpu", "eval.precision").model_for(trained) is bf16  # one copy


def test_predictions_per_recurrence_end_in_the_kv_predictions():
    model = build("abacus", layers=1, recurrences=3, seed=4, vocab=118)
    cells = prepared("sort", [(2, 3)], count=5)  # prompts of several lengths
    texts = predictions_per_recurrence(model, cells[0])
    assert len(texts) == 3 and all(len(t) == 5 for t in texts)
    assert texts[-1] == run_cells(model, cells, engine="kv")[0].predictions
    assert texts[0] != texts[-1]  # intermediate recurrences read differently (a random model)


class Recording(torch.nn.Module):
    """The model itself, keeping every row's logits at its own positions (keyed by its tokens and
    noise)."""

    def __init__(self, inner: ArithmeticTransformer):
        super().__init__()
        self.inner, self.cfg = inner, inner.cfg
        self.rows: dict[tuple, torch.Tensor] = {}

    def forward(self, input_ids, noise=None, **kw):
        logits = self.inner(input_ids, noise=noise, **kw)
        for b, ids in enumerate(input_ids.tolist()):
            pad = next((k for k, t in enumerate(reversed(ids)) if t != 0), len(ids))  # PAD = 0
            n = len(ids) - pad
            key = (tuple(ids[:n]), tuple(noise[b, 0, :4].tolist()))
            assert key not in self.rows
            self.rows[key] = logits[b, :n].clone()
        return logits


def test_a_rows_teacher_forced_logits_do_not_depend_on_the_cells_beside_it():
    """Every row's logits are bit-identical whether its cell is scored alone, among others or under
    any budget: a rerun that scores only the missing cells packs them into other batches, and a
    padded length taken from the batch moved logits by an ulp (argmax ties then flip)."""
    cells = prepared("add", [(1, 1), (2, 5), (5, 2), (6, 6), (9, 3)], count=6)
    model = build("abacus", layers=2, hidden=32)
    runs = []
    for packing in ([cells], [[c] for c in cells], [cells[::-1]], [cells[:2], cells[2:]]):
        for budget in (64, 10_000):
            rec = Recording(model)
            for group in packing:
                run_cells(rec, group, engine="teacher", token_budget=budget)
            runs.append(rec.rows)
    assert all(run.keys() == runs[0].keys() for run in runs) and len(runs[0]) == 5 * 6
    for run in runs[1:]:
        assert all(torch.equal(run[k], runs[0][k]) for k in run)
