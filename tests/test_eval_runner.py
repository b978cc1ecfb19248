"""The runner: rows and samples from `score_cells`, checked against Python big-int arithmetic, and
`evaluate`'s skip-what-is-there behaviour on real checkpoints."""

from types import SimpleNamespace

import pytest
import torch

from abacus_ray.config import preset
from abacus_ray.config.evaluation import EvalConfig
from abacus_ray.evaluation.grids import Cell, parse_cells
from abacus_ray.evaluation.results import KEY, read_cells, read_samples
from abacus_ray.evaluation.runner import evaluate, score_cells
from abacus_ray.evaluation.work import check_capacity
from abacus_ray.model import ArithmeticTransformer
from abacus_ray.model.cache import KVCache
from abacus_ray.model.checkpoint import save_checkpoint
from abacus_ray.storage import on_disk
from abacus_ray.tasks.tokenizer import EOS, PAD, get_tokenizer

TOK = get_tokenizer("pad")


def true_answer(prompt: str) -> int:
    """The exact result of a reversed-operand prompt, e.g. '21+3=' -> 12 + 3."""
    body = prompt[:-1]
    for op in "+-x":
        if op in body:
            a, b = body.split(op)
            a, b = int(a[::-1]), int(b[::-1])
            return {"+": a + b, "-": a - b, "x": a * b}[op]
    raise AssertionError(prompt)


def text_to_int(reversed_text: str) -> int:
    """Inverse of the answer format: reversed digits, a trailing '-' for negatives."""
    neg = reversed_text.endswith("-")
    digits = reversed_text[:-1] if neg else reversed_text
    assert digits.isdigit(), reversed_text
    return -int(digits[::-1]) if neg else int(digits[::-1])


class FlawedOracle(torch.nn.Module):
    """Knows arithmetic, but answers r + 1 whenever the true result r is divisible by 3.

    Logits are one-hot on the next token of its own (reversed) answer + EOS; a KV cache just keeps the
    token history. It satisfies the model contract the engines use.
    """

    def __init__(self):
        super().__init__()
        self.dummy = torch.nn.Parameter(torch.zeros(1))
        self.cfg = SimpleNamespace(init_state="zeros", init_std=0.0, hidden=4, test_recurrences=1)
        self.vocab_size = TOK.vocab_size
        self.chars = TOK.id_to_char()

    def new_cache(self):
        return KVCache(layers=1)

    def answer_ids(self, prompt: str) -> list[int]:
        r = true_answer(prompt)
        r = r + 1 if r % 3 == 0 else r
        text = str(abs(r))[::-1] + ("-" if r < 0 else "")
        return TOK.encode(text, eos=True)

    def forward(self, input_ids, *, recurrences=None, noise=None, cache=None, all_recurrences=False, **kw):
        if cache is not None:
            history = input_ids if cache.length == 0 else torch.cat([cache.slots[0][0], input_ids], dim=1)
            cache.store(0, 0, (history, history))
            cache.length = history.shape[1]
        else:
            history = input_ids
        start = history.shape[1] - input_ids.shape[1]
        logits = torch.zeros(*input_ids.shape, self.vocab_size)
        for b, row in enumerate(history.tolist()):
            eq = row.index(TOK.equals_id) if TOK.equals_id in row else None
            want = self.answer_ids("".join(self.chars[t] for t in row[:eq + 1])) if eq is not None else []
            for t in range(start, len(row)):
                nxt = PAD if eq is None or t < eq else (want[t - eq] if t - eq < len(want) else EOS)
                logits[b, t - start, nxt] = 10.0
        return logits[None] if all_recurrences else logits


def oracle_checkpoint(task="add"):
    cfg = preset("tiny", [f"task.name={task}"])
    return SimpleNamespace(model=FlawedOracle().eval(), config=cfg, model_id="oracle", path="memory")


@pytest.mark.parametrize("task, cells", [
    ("add", [(1, 1), (3, 2), (25, 30)]),  # 25+ digits: beyond 64-bit integers
    ("sub", [(1, 2), (4, 4), (20, 21)]),  # negative answers end in '-'
    ("mul", [(2, 2), (12, 9)]),
])
def test_samples_agree_with_python_big_ints(task, cells):
    ckpt = oracle_checkpoint(task)
    cells = [Cell(task, i, j) for i, j in cells]
    rows, samples = score_cells(ckpt, cells, EvalConfig(per_cell=12, seed=3), samples=True, run_id="r1")
    assert len(rows) == len(cells) and len(samples) == 12 * len(cells)
    for s in samples:
        truth = true_answer(s["prompt"])
        assert text_to_int(s["target"]) == truth  # the eval set's answers are right
        assert s["correct"] == (s["stopped"] and text_to_int(s["prediction"]) == truth)
        assert s["correct"] == (truth % 3 != 0)  # the oracle's flaw, seen through the evaluator
        if not s["correct"]:
            assert s["first_wrong"] >= 0
    for r in rows:
        mine = [s for s in samples if (s["i"], s["j"]) == (r["i"], r["j"])]
        assert r["n"] == 12 and r["n_correct"] == sum(s["correct"] for s in mine)
        assert r["accuracy"] == r["n_correct"] / 12 and r["run_id"] == "r1" and r["engine"] == "kv"
        assert r["region"] == ("id" if max(r["i"], r["j"]) <= 5 else "ood")
        assert r["model.positions"] == "abacus" and r["task.train_max_len"] == 5
    assert 0 < sum(s["correct"] for s in samples) < len(samples)
    for engine in ("teacher", "naive"):  # the other engines give the same counts
        plain, none = score_cells(ckpt, cells, EvalConfig(per_cell=12, seed=3, engine=engine))
        assert none == [] and [r["n_correct"] for r in plain] == [r["n_correct"] for r in rows]
        assert {r["engine"] for r in plain} == {engine}


def test_capacity_is_checked_before_any_work():
    cfg = preset("tiny", ["model.abacus_table=128"])
    check_capacity(cfg, [Cell("add", 126, 3)])
    with pytest.raises(ValueError, match="^model.abacus_table: cell add 127x3 needs 129"):
        check_capacity(cfg, [Cell("add", 1, 1), Cell("add", 127, 3)])
    check_capacity(cfg.with_overrides(["model.positions=fire"]), [Cell("add", 500, 500)])


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpts")
    paths = []
    for seed in (0, 1):
        cfg = preset("tiny", ["model.hidden=16", "model.intermediate=32", "model.heads=2", "model.layers=1",
                              f"seed={seed}"])
        torch.manual_seed(seed)
        model = ArithmeticTransformer.for_experiment(cfg)
        paths.append(on_disk(root / f"run{seed}"))
        save_checkpoint(paths[-1], model, cfg, {"step": 0})
    return paths


def test_evaluate_scores_only_missing_cells(checkpoints, tmp_path):
    out = on_disk(tmp_path / "results")
    cfg = EvalConfig(per_cell=4)
    first = evaluate(checkpoints[:1], parse_cells("1-3x1-3"), cfg, out, progress=False, flush_every_cells=4)
    (mid,) = first.evaluated
    assert first.evaluated[mid] == 9 and first.skipped[mid] == 0
    assert len(first.parts) >= 3  # flushed every 4 cells
    again = evaluate(checkpoints, parse_cells("1-4x1-4"), cfg, out, progress=False)
    assert again.evaluated[mid] == 7 and again.skipped[mid] == 9
    other = next(k for k in again.evaluated if k != mid)
    assert again.evaluated[other] == 16
    df = read_cells(out)
    assert len(df) == 32 and not df.duplicated(list(KEY)).any()
    assert set(df["seed"]) == {0, 1}
    # a different eval seed or per-cell count is a different key: scored again
    evaluate(checkpoints[:1], parse_cells("1x1"), EvalConfig(per_cell=4, seed=9), out, progress=False)
    assert len(read_cells(out)) == 33


def test_evaluate_writes_samples_and_reproduces_numbers(checkpoints, tmp_path):
    cfg = EvalConfig(per_cell=5, seed=2)
    grid = parse_cells("2-3x2")
    at_a, at_b = on_disk(tmp_path / "a"), on_disk(tmp_path / "b")
    evaluate(checkpoints[:1], grid, cfg, at_a, progress=False, samples=True)
    evaluate(checkpoints[:1], grid, EvalConfig(per_cell=5, seed=2, engine="naive"), at_b, progress=False)
    a, b = read_cells(at_a), read_cells(at_b)
    cols = ["i", "j", "n", "n_correct", "n_first_correct"]
    assert a.sort_values(["i", "j"])[cols].values.tolist() == b.sort_values(["i", "j"])[cols].values.tolist()
    s = read_samples(at_a)
    assert len(s) == 10 and set(s["engine"]) == {"kv"}
    assert s["prompt"].str.endswith("=").all() and (s["prompt"].str.count(r"\+") == 1).all()
    assert read_samples(at_b).empty


def test_evaluate_refuses_grids_of_another_task(checkpoints, tmp_path):
    from abacus_ray.evaluation.grids import get_grid

    with pytest.raises(ValueError, match="^grid: 'paper-sorting'"):
        evaluate(checkpoints[:1], get_grid("paper-sorting"), EvalConfig(), on_disk(tmp_path), progress=False)
