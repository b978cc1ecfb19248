"""`TrainStream` and `encode_problems`: decoded batches are correct, stratified, deterministic, shardable."""

from __future__ import annotations

from collections import Counter

import example_plugin  # noqa: F401  (registers examples/add3.py, a task of one's own)
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tasks_oracle import check_arithmetic, check_hinted, check_or, check_sort

from abacus_ray.tasks import (
    Batch,
    Problem,
    TaskConfig,
    TrainStream,
    encode_problems,
    generate,
    get_tokenizer,
)
from abacus_ray.tasks.tokenizer import EOS, PAD


def rows_of(batch: Batch) -> list[list[int]]:
    """Each row's ids before padding (EOS included)."""
    return [row[:n].tolist() for row, n in zip(batch.input_ids, batch.lengths, strict=True)]


def check_batch_layout(batch: Batch, tokenizer) -> list[str]:
    """Assert the padding / mask / lengths invariants; return each row's text (PADs dropped)."""
    ids, mask, lengths = batch
    assert ids.dtype == torch.int64 and mask.dtype == torch.bool and lengths.dtype == torch.int64
    assert ids.shape == mask.shape and ids.shape[0] == lengths.shape[0]
    assert ids.shape[1] == int(lengths.max())  # padded to the batch's own longest row
    texts = []
    for row, m, n in zip(ids.tolist(), mask.tolist(), lengths.tolist(), strict=True):
        assert row[n - 1] == EOS and EOS not in row[: n - 1]
        assert all(t == PAD for t in row[n:])
        eq = row.index(tokenizer.equals_id)
        expected = [eq < k < n and row[k] != PAD for k in range(len(row))]
        assert m == expected  # answer tokens and EOS, nothing before "=", no PAD
        texts.append(tokenizer.decode(row))
    return texts


def check_text(task: TaskConfig, text: str) -> tuple[int, int]:
    """Check one decoded training row with the oracle; returns its (i, j) pair."""
    prompt, answer = text.split("=")[0] + "=", text.split("=", 1)[1]
    if task.name == "sort":
        check_sort(prompt, answer, d=task.train_max_len)
        elements = prompt[:-1].split(",")
        return max(len(e) - 2 for e in elements), len(elements)
    if task.name == "or":
        check_or(prompt, answer)
        u, v = prompt[:-1].split("+")
        return len(u), len(v)
    if task.name == "add3":  # examples/add3.py: A+B+C, every number reversed
        a, b, c = (int(t[::-1]) for t in prompt[:-1].split("+"))
        assert len(str(b)) == len(str(c)) and int(answer[::-1]) == a + b + c, (prompt, answer)
        return len(str(a)), len(str(b))
    if task.index_hints != "none":
        check_hinted(prompt, answer, task.index_hints)
        op = next(ch for ch in prompt[1:] if ch in "+-")
        a, b = prompt[:-1].split(op, 1)
        return sum(c.isdigit() for c in a), sum(c.isdigit() for c in b)
    ops = {"add": "+", "sub": "-", "mul": "x", "addsub": "+-"}[task.name]
    a, op, b = check_arithmetic(prompt, answer, ops=ops)
    return len(str(a)), len(str(b))


TASKS = [
    TaskConfig(name="add", train_max_len=6),
    TaskConfig(name="sub", train_max_len=6),
    TaskConfig(name="mul", train_max_len=5),
    TaskConfig(name="addsub", train_max_len=6),
    TaskConfig(name="sort", train_max_len=4, train_max_array=5),
    TaskConfig(name="or", train_max_len=6),
    TaskConfig(name="add", train_max_len=6, pad_p=0.3),
    TaskConfig(name="addsub", train_max_len=6, index_hints="cyclic"),
    TaskConfig(name="sub", train_max_len=6, index_hints="noncyclic", pad_p=0.2),
    TaskConfig(name="sort", train_max_len=3, train_max_array=4, pad_p=0.2),
    TaskConfig(name="add3", train_max_len=5),  # a plugin's task (examples/add3.py)
    TaskConfig(name="add3", train_max_len=4, pad_p=0.2),
]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: f"{t.name}-{t.index_hints}-p{t.pad_p}")
def test_batches_decode_to_correct_problems_with_exact_mask(task):
    stream = TrainStream(task, seed=1)
    tokenizer = get_tokenizer(task.tokenizer_name)
    batch = stream.batch(3, 40)
    texts = check_batch_layout(batch, tokenizer)
    pairs = list(zip(*(a.tolist() for a in stream.pairs(3, 40)), strict=True))
    for text, pair in zip(texts, pairs, strict=True):
        if task.name == "sort":
            d, m = check_text(task, text)
            assert m == pair[1] and d <= pair[0]
        else:
            assert check_text(task, text) == pair
    rows = zip(batch.input_ids, batch.lengths, strict=True)
    inner_pads = sum((row[:n] == PAD).sum().item() for row, n in rows)
    assert (inner_pads > 0) == (task.pad_p > 0)  # random padding puts PADs inside rows, nothing else does


def test_full_pass_hits_every_pair_exactly_equally_often():
    task = TaskConfig(name="add", train_max_len=4)  # P = 16 pairs
    stream = TrainStream(task, seed=0)
    counts = Counter()
    for index in range(8):  # 8 batches x 6 rows = 48 = 3 full passes, batches straddle passes
        for text in check_batch_layout(stream.batch(index, 6), get_tokenizer("pad")):
            counts[check_text(task, text)] += 1
    assert counts == {(i, j): 3 for i in range(1, 5) for j in range(1, 5)}


def test_pairs_loop_order_and_sort_grid():
    stream = TrainStream(TaskConfig(name="add", train_max_len=3), seed=0)
    i, j = stream.pairs(0, 9)
    assert list(zip(i.tolist(), j.tolist(), strict=True)) == [(a, b) for a in (1, 2, 3) for b in (1, 2, 3)]
    sort = TrainStream(TaskConfig(name="sort", train_max_len=2, train_max_array=3), seed=0)
    assert sort.num_pairs == 6
    i, j = sort.pairs(1, 4)  # samples 4..7
    assert list(zip(i.tolist(), j.tolist(), strict=True)) == [(2, 2), (2, 3), (1, 1), (1, 2)]
    counts = Counter()
    for k in range(3):
        for text in check_batch_layout(sort.batch(k, 4), get_tokenizer("sort")):
            counts[check_text(sort.task, text)[1]] += 1
    assert counts == {1: 4, 2: 4, 3: 4}  # array lengths stratified (2 passes of 6)


@pytest.mark.parametrize("task", [TASKS[0], TASKS[2], TASKS[3], TASKS[4], TASKS[6], TASKS[7],
                                  TASKS[10], TASKS[11]],
                         ids=lambda t: f"{t.name}-{t.index_hints}-p{t.pad_p}")
def test_rank_shards_concatenate_to_the_unsharded_batch(task):
    stream = TrainStream(task, seed=7)
    whole = rows_of(stream.batch(5, 24))
    shards = [rows_of(stream.batch(5, 12, rank=r, world_size=2)) for r in range(2)]
    assert shards[0] + shards[1] == whole
    quarters = [rows_of(stream.batch(5, 6, rank=r, world_size=4)) for r in range(4)]
    assert sum(quarters, []) == whole


@pytest.mark.parametrize("name", ["add", "sub", "mul", "addsub"])
def test_fast_path_equals_string_path(name):
    task = TaskConfig(name=name, train_max_len=9)
    fast, slow = TrainStream(task, seed=3), TrainStream(task, seed=3, fast_path=False)
    assert fast.uses_fast_path and not slow.uses_fast_path
    for index in (0, 1, 17):
        a, b = fast.batch(index, 64), slow.batch(index, 64)
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y)


def test_determinism_resume_and_seed_independence():
    task = TaskConfig(name="addsub", train_max_len=8)
    first = TrainStream(task, seed=11)
    history = [first.batch(k, 16) for k in range(6)]
    resumed = TrainStream(task, seed=11).batch(5, 16)  # a fresh stream, no history
    assert all(torch.equal(x, y) for x, y in zip(history[5], resumed, strict=True))
    other_seed = TrainStream(task, seed=12).batch(5, 16)
    assert not torch.equal(rows_padded(history[5]), rows_padded(other_seed))
    assert not torch.equal(rows_padded(history[4]), rows_padded(history[5]))
    # padding and hints do not change the operands drawn for the same seed
    plain = TrainStream(TaskConfig(name="add", train_max_len=8), seed=11).problems(2, 10)
    padded = TrainStream(TaskConfig(name="add", train_max_len=8, pad_p=0.5), seed=11).problems(2, 10)
    assert [p.prompt.replace(" ", "") for p in padded] == [p.prompt for p in plain]


def rows_padded(batch: Batch) -> torch.Tensor:
    return torch.nn.functional.pad(batch.input_ids, (0, 64 - batch.input_ids.shape[1]))


def test_problems_view_matches_batch():
    for task in (TASKS[0], TASKS[4], TASKS[7]):
        stream = TrainStream(task, seed=2)
        tok = get_tokenizer(task.tokenizer_name)
        problems = stream.problems(4, 12)
        texts = [tok.decode(r) for r in stream.batch(4, 12).input_ids]
        assert texts == [(p.prompt + p.answer).replace(" ", "") for p in problems]


def test_encode_decode_round_trip_and_mask():
    tok = get_tokenizer("pad")
    problems = [Problem("98282+3859172=", "2787472"), Problem("4-8=", "4-"), Problem(" 6+6=", " 2 1")]
    batch = encode_problems(problems, tok)
    assert batch.input_ids[0, :15].tolist() == tok.encode("98282+3859172=2787472", eos=True)[:15]
    assert [tok.decode(r) for r in batch.input_ids] == ["98282+3859172=2787472", "4-8=4-", "6+6=21"]
    assert batch.lengths.tolist() == [22, 7, 10]
    assert batch.input_ids.shape == (3, 22)
    assert batch.target_mask[2].tolist()[:10] == [False] * 6 + [True, False, True, True]
    assert batch.target_mask[1].tolist()[:7] == [False] * 4 + [True] * 3
    assert batch.target_mask.sum().item() == 8 + 3 + 3
    for p in generate("sort", 3, 6, 5, 0):
        row = encode_problems([p], get_tokenizer("sort")).input_ids[0]
        assert get_tokenizer("sort").decode(row) == p.prompt + p.answer
        assert row.tolist() == get_tokenizer("sort").encode(p.prompt + p.answer, eos=True)
    hinted = generate("add", 4, 4, 3, 0, index_hints="cyclic")
    ids = encode_problems(hinted, get_tokenizer("index")).input_ids
    assert [get_tokenizer("index").decode(r) for r in ids] == [p.prompt + p.answer for p in hinted]


def test_batch_to_device():
    batch = TrainStream(TASKS[0], seed=0).batch(0, 4).to("cpu")
    assert isinstance(batch, Batch) and batch.input_ids.device.type == "cpu"


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(["add", "sub", "mul", "addsub"]), n=st.integers(1, 30),
       seed=st.integers(0, 2**31), index=st.integers(0, 10**9), size=st.integers(1, 48))
def test_property_stream_rows_are_correct(name, n, seed, index, size):
    task = TaskConfig(name=name, train_max_len=n)
    stream = TrainStream(task, seed=seed)
    texts = check_batch_layout(stream.batch(index, size), get_tokenizer("pad"))
    pairs = list(zip(*(a.tolist() for a in stream.pairs(index, size)), strict=True))
    assert [check_text(task, t) for t in texts] == pairs


@pytest.mark.parametrize("call,message", [
    (lambda s: s.batch(-1, 4), "index: must be >= 0, got -1"),
    (lambda s: s.batch(0, 0), "size: must be >= 1, got 0"),
    (lambda s: s.batch(0, 4, rank=2, world_size=2), "rank: must be < world_size=2, got 2"),
    (lambda s: s.batch(0, 4, rank=-1, world_size=2), "rank: must be >= 0"),
    (lambda s: s.batch(0, 4, world_size=0), "world_size: must be >= 1, got 0"),
    (lambda s: s.batch(1.5, 4), "index: must be an integer"),
])
def test_bad_batch_arguments(call, message):
    with pytest.raises(ValueError) as e:
        call(TrainStream(TASKS[0], seed=0))
    assert str(e.value).startswith(message), str(e.value)


def test_bad_stream_configs():
    with pytest.raises(ValueError, match=r"^task.train_max_len: i: 102\+102-digit"):
        TrainStream(TaskConfig(name="add", train_max_len=102, index_hints="noncyclic"), seed=0)
    TrainStream(TaskConfig(name="add", train_max_len=101, index_hints="noncyclic"), seed=0)
    with pytest.raises(ValueError, match=r"^task.train_max_array: j: an array of 101"):
        TrainStream(TaskConfig(name="sort", train_max_array=101), seed=0)
    with pytest.raises(ValueError, match=r"^task: expected a TaskConfig"):
        TrainStream({"name": "add"}, seed=0)
    with pytest.raises(ValueError, match=r"^seed: must be an integer"):
        TrainStream(TASKS[0], seed=None)
    with pytest.raises(ValueError, match=r"^problems: character 'A' is not in the 'pad' vocabulary"):
        encode_problems([Problem("A+1=", "1")], get_tokenizer("pad"))
    with pytest.raises(ValueError, match=r"^problems: must not be empty"):
        encode_problems([], get_tokenizer("pad"))
