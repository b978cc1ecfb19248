"""Bad input is refused (3/3): truncated, random and wrong-architecture checkpoints, unwritable output
directories, empty and foreign results directories, and the sweep files' and `eval-all`'s flags,
which must be refused before Ray starts."""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import math
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from refusal import FUZZ, REPO, assert_refused, fresh_dir
from test_bad_input import (
    _OPTION,
    SET_ITEMS,
    _int_text_ok,
    _not_in,
    _parses,
    _refused_set_item,
    _set,
)
from test_bad_input_specs import GRID_CULPRITS, GRID_TEXT

from abacus_ray.evaluation.grids import grid_from_string
from abacus_ray.model.checkpoint import content_hash

# --- 7. truncated, random and wrong-architecture checkpoints -------------------------------------------------

def corrupted_copy(ckpt: Path, work: Path, name: str, content: bytes | None) -> Path:
    """A copy of `ckpt` in a fresh directory with file `name` replaced (None: removed)."""
    target = fresh_dir(work) / "ck"
    shutil.copytree(ckpt, target)
    (target / name).unlink()
    if content is not None:
        (target / name).write_bytes(content)
    return target


def assert_checkpoint_refused(target: Path, work: Path, category: str, file: str | None = None) -> str:
    out = target.parent / "results"
    culprit = str(target / file) if file else str(target)
    message = assert_refused(["eval", str(target), "--out", str(out), "--quiet", "--cells", "1x1"], culprit, category,
                             roots=[target.parent])
    assert not out.exists()
    shutil.rmtree(target.parent)
    return message


@FUZZ
@given(data=st.data(), name=st.sampled_from(["model.pt", "config.json", "meta.json"]))
def test_truncated_checkpoint_files(data, name, ckpt, work):
    full = (ckpt / name).read_bytes()
    cut = data.draw(st.integers(0, len(full) - 1), label="cut")
    target = corrupted_copy(ckpt, work, name, full[:cut])
    assert_checkpoint_refused(target, work, "checkpoints: truncated", name)


def _json_object(b: bytes) -> bool:
    try:
        return isinstance(json.loads(b), dict)
    except (ValueError, UnicodeDecodeError):
        return False


@FUZZ
@given(content=st.binary(max_size=3000), name=st.sampled_from(["model.pt", "config.json", "meta.json"]))
def test_random_bytes_checkpoint_files(content, name, ckpt, work):
    if name != "model.pt" and _json_object(content):  # e.g. b"{}": a valid (default) config or meta
        return
    target = corrupted_copy(ckpt, work, name, content)
    assert_checkpoint_refused(target, work, "checkpoints: random bytes", name)


# config.json edits that describe another model than the weights hold (1 x 16, 2 heads, table 128); hidden
# 2**16 would need gigabytes: refused before any allocation (shapes compared on the meta device first);
# values beyond the config bounds are tests/test_bad_input_bounds.py's
ARCH_CHANGES = {
    "model.layers": st.integers(2, 64),
    "model.hidden": st.sampled_from([2, 8, 32, 1024, 2**16]),
    "model.intermediate": st.sampled_from([2, 16, 64, 2**18]),
    "model.positions": st.sampled_from(["fire", "nope", "rope", "learned", "abacus+fire"]),
    "model.abacus_table": st.integers(22, 10**6).filter(lambda n: n != 128),
    "task.name": st.just("sort"),
    "task.index_hints": st.sampled_from(["cyclic", "noncyclic"]),
}


@FUZZ
@given(key=st.sampled_from(sorted(ARCH_CHANGES)), data=st.data())
def test_wrong_architecture_checkpoints(key, data, ckpt, work):
    cfg = json.loads((ckpt / "config.json").read_text())
    _set(cfg, key, data.draw(ARCH_CHANGES[key], label=key))
    target = corrupted_copy(ckpt, work, "config.json", json.dumps(cfg).encode())
    message = assert_checkpoint_refused(target, work, "checkpoints: wrong architecture", "model.pt")
    assert "weights" in message


def test_checkpoint_files_missing_swapped_or_not_a_checkpoint(ckpt, mul_ckpt, work):
    for name in ("model.pt", "config.json"):
        assert_checkpoint_refused(corrupted_copy(ckpt, work, name, None), work, "checkpoints: missing / swapped", name)
    # weights of another model (a multiplication model with a smaller table; then the same model, nudged)
    assert_checkpoint_refused(corrupted_copy(ckpt, work, "model.pt", (mul_ckpt / "model.pt").read_bytes()), work,
                              "checkpoints: missing / swapped", "model.pt")
    weights = torch.load(ckpt / "model.pt", weights_only=True)
    weights["decoder.weight"] = weights["decoder.weight"] + 1e-3
    buffer = io.BytesIO()
    torch.save(weights, buffer)
    message = assert_checkpoint_refused(corrupted_copy(ckpt, work, "model.pt", buffer.getvalue()), work,
                                        "checkpoints: missing / swapped", "model.pt")
    assert "does not match meta.json" in message
    # no meta.json: not a checkpoint; an empty directory; a file
    assert_checkpoint_refused(corrupted_copy(ckpt, work, "meta.json", None), work, "checkpoints: missing / swapped")
    empty = fresh_dir(work) / "ck"
    empty.mkdir()
    assert_checkpoint_refused(empty, work, "checkpoints: missing / swapped")
    plain = fresh_dir(work) / "ck"
    plain.write_text("not a checkpoint")
    assert_checkpoint_refused(plain, work, "checkpoints: missing / swapped")


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_run_data_json_holding_a_number_json_has_not_is_refused(number, ckpt, work):
    """Python's json reads NaN and Infinity, which JSON has not: a meta.json with a NaN batch size
    used to load."""
    meta = (ckpt / "meta.json").read_text().replace('"step": ', f'"batch": {number}, "step": ', 1)
    target = corrupted_copy(ckpt, work, "meta.json", meta.encode())
    message = assert_checkpoint_refused(target, work, "checkpoints: missing / swapped", "meta.json")
    assert f"batch holds {number}, which JSON has no number for" in message


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_weights_that_are_not_numbers(value, ckpt, work):
    """NaN or infinite weights (a diverged run, a corrupted copy) are refused on load, naming the tensor, even
    when meta.json's model_id was made to match them."""
    weights = torch.load(ckpt / "model.pt", weights_only=True)
    weights["layers.0.ffn.w_in.weight"][1, 2] = value
    buffer = io.BytesIO()
    torch.save(weights, buffer)
    target = corrupted_copy(ckpt, work, "model.pt", buffer.getvalue())
    meta = json.loads((target / "meta.json").read_text())
    (target / "meta.json").write_text(json.dumps({**meta, "model_id": content_hash(weights)}))
    message = assert_checkpoint_refused(target, work, "checkpoints: not numbers", "model.pt")
    assert "layers.0.ffn.w_in.weight holds 1 NaN or infinite value(s)" in message


def test_one_bad_checkpoint_among_several_writes_nothing(ckpt, work):
    bad = corrupted_copy(ckpt, work, "model.pt", b"\x80\x02garbage")
    out = bad.parent / "results"
    assert_refused(["eval", str(ckpt), str(bad), "--out", str(out), "--quiet", "--cells", "1x1"],
                   str(bad / "model.pt"), "checkpoints: missing / swapped", roots=[bad.parent, ckpt])
    assert not out.exists()


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@FUZZ
@given(content=st.binary(max_size=2000), truncate=st.booleans())
def test_resume_refuses_a_bad_training_state(content, truncate, ckpt, work):
    run_dir = fresh_dir(work) / "run"
    shutil.copytree(ckpt, run_dir / "step-000000001")
    state = run_dir / "step-000000001" / "train_state.pt"
    if truncate:
        full = state.read_bytes()
        content = full[: len(content) % len(full)]
    state.write_bytes(content)
    assert_refused(["train", "--out", str(run_dir), "--resume", "--device", "cpu"], str(state),
                   "checkpoints: bad training state", roots=[run_dir.parent])
    shutil.rmtree(run_dir.parent)


def test_resume_refuses_a_training_state_without_its_counters(ckpt, work):
    run_dir = fresh_dir(work) / "run"
    shutil.copytree(ckpt, run_dir / "step-000000001")
    state = run_dir / "step-000000001" / "train_state.pt"
    for content in ({}, {"step": 1}, [1, 2], torch.zeros(3)):
        torch.save(content, state)
        assert_refused(["train", "--out", str(run_dir), "--resume", "--device", "cpu"], str(state),
                       "checkpoints: bad training state", roots=[run_dir.parent])


# --- 8. unwritable output directories --------------------------------------------------------------------

def _out_path(kind: str, work: Path, unwritable: Path | None) -> Path:
    if kind == "under-a-file":
        f = fresh_dir(work) / "a-file"
        f.write_text("x")
        return f / "out"
    if kind == "is-a-file":
        f = fresh_dir(work) / "a-file"
        f.write_text("x")
        return f
    if unwritable is None:
        pytest.skip("no unwritable directory on this machine (root, and no read-only kernel filesystem)")
    return unwritable / "abacus-ray-out"


@pytest.fixture(scope="module")
def results_dir(work) -> Path:
    from dashboards.sample import synthetic_results

    return synthetic_results(work / "results-ok" / "results", [("s/run", [])], [(1, 1), (2, 2)], per_cell=4)


@pytest.mark.parametrize("kind", ["under-a-file", "is-a-file", "read-only"])
@pytest.mark.parametrize("command", ["eval", "train", "dashboard"])
def test_unwritable_output_directories(command, kind, ckpt, results_dir, work, unwritable):
    out = _out_path(kind, work, unwritable)
    argv = {"eval": ["eval", str(ckpt), "--out", str(out), "--cells", "1x1", "--quiet"],
            "train": ["train", "--out", str(out), "--set", "train.max_steps=1", "--device", "cpu"],
            "dashboard": ["dashboard", str(results_dir), "--out", str(out)]}[command]
    assert_refused(argv, "--out", "unwritable output directory", roots=[work])
    assert kind == "is-a-file" or not out.exists()


# --- 9. empty and foreign results directories ---------------------------------------------------------------

# Columns every abacus-ray results part holds (the results key, region and counts): without one, a part is foreign.
REQUIRED = ("model_id", "task", "i", "j", "per_cell", "eval_seed", "recurrences", "require_eos", "region", "n",
            "n_correct", "accuracy")


def _parquet(path: Path, columns: dict) -> None:
    pq.write_table(pa.table(columns), path)


FOREIGN_KINDS = ["missing", "file", "empty", "junk", "random-part", "foreign-parquet", "future-schema", "part-is-a-dir"]


def make_foreign(root: Path, kind: str, data) -> Path:
    d = root / "results"
    if kind == "missing":
        return d
    if kind == "file":
        d.write_bytes(data.draw(st.binary(max_size=100)))
        return d
    d.mkdir()
    if kind == "junk":
        for name in data.draw(st.lists(st.from_regex(r"[a-z]{1,8}\.(txt|json|csv|pt)", fullmatch=True), min_size=1,
                                       max_size=3, unique=True)):
            (d / name).write_bytes(data.draw(st.binary(max_size=100)))
    elif kind == "random-part":
        (d / "part-0.parquet").write_bytes(data.draw(st.binary(max_size=500)))
    elif kind == "foreign-parquet":
        wanted = ["schema_version", *REQUIRED]
        keep = data.draw(st.lists(st.sampled_from(wanted), unique=True, max_size=len(wanted) - 1))
        extra = data.draw(st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True).filter(lambda c: c not in wanted),
                                   unique=True, max_size=3))
        cols = {c: pa.array([1], pa.int32() if c == "schema_version" else pa.int64()) for c in keep + extra}
        _parquet(d / "part-0.parquet", cols or {"x": [1]})
    elif kind == "future-schema":
        v = data.draw(st.integers(2, 2**31 - 1))
        _parquet(d / "part-0.parquet", {"schema_version": pa.array([v], pa.int32()),
                                        **{c: pa.array([1]) for c in REQUIRED}})
    elif kind == "part-is-a-dir":
        (d / "part-0.parquet").mkdir()
    return d


@FUZZ
@given(kind=st.sampled_from(FOREIGN_KINDS), data=st.data(),
       command=st.sampled_from(["summary", "dashboard", "eval --out"]))
def test_empty_and_foreign_results_directories(kind, data, command, ckpt, work):
    root = fresh_dir(work)
    d = make_foreign(root, kind, data)
    if command == "summary":
        argv = ["summary", str(d)]
    elif command == "dashboard":
        argv = ["dashboard", str(d), "--out", str(root / "site")]
    else:
        if kind in ("missing", "empty", "junk"):  # a fine place for new results
            return
        argv = ["eval", str(ckpt), "--out", str(d), "--cells", "1x1", "--quiet"]
    assert_refused(argv, (str(d), "RESULTS", "--out"), "empty / foreign results directories", roots=[root])
    assert not (root / "site").exists()
    shutil.rmtree(root)


@pytest.mark.parametrize("missing", REQUIRED)
def test_results_part_without_a_required_column(missing, ckpt, work):
    root = fresh_dir(work)
    d = root / "results"
    d.mkdir()
    _parquet(d / "part-0.parquet", {"schema_version": pa.array([1], pa.int32()),
                                    **{c: pa.array([1]) for c in REQUIRED if c != missing}})
    for argv in (["summary", str(d)], ["dashboard", str(d), "--out", str(root / "site")],
                 ["eval", str(ckpt), "--out", str(d), "--cells", "1x1", "--quiet"]):
        message = assert_refused(argv, str(d), "empty / foreign results directories", roots=[root])
        assert f"(no {missing} column)" in message


@pytest.mark.parametrize("column", ["n", "n_correct", "accuracy", "i"])
def test_results_part_with_a_number_column_of_text(column, ckpt, work):
    root = fresh_dir(work)
    d = root / "results"
    d.mkdir()
    text = {"model_id", "task", "region", "require_eos"}
    _parquet(d / "part-0.parquet", {"schema_version": pa.array([1], pa.int32()),
                                    **{c: pa.array(["1"] if c in text or c == column else [1])
                                       for c in REQUIRED}})
    for argv in (["summary", str(d)], ["dashboard", str(d), "--out", str(root / "site")]):
        message = assert_refused(argv, str(d), "empty / foreign results directories", roots=[root])
        assert f"(column {column} holds string, not " in message


# --- 10. sweep files and eval-all: refused before Ray starts -------------------------------------------

@functools.cache
def load_sweep(name: str):
    path = REPO / "sweeps" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"sweep_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SWEEP


def _grid_refused(text: str) -> bool:
    try:
        grid_from_string(text)
    except ValueError:
        return True
    return False


SWEEP_FLAGS = st.one_of(
    SET_ITEMS.filter(lambda item: _refused_set_item(item[0])).map(lambda item: ([f"--set={item[0]}"], item[1])),
    st.integers(max_value=0).map(lambda n: ([f"--seeds={n}"], "--seeds")),
    st.text(max_size=6).filter(lambda s: not _int_text_ok(s)).map(lambda s: ([f"--seeds={s}"], "--seeds")),
    GRID_TEXT.filter(_grid_refused).map(lambda s: ([f"--grid={s}"], GRID_CULPRITS)),
    (st.floats(max_value=0, allow_infinity=False) | st.sampled_from([math.nan, math.inf])).map(
        lambda h: ([f"--budget-hours={h}"], "train.budget_hours")),
    st.text(max_size=6).filter(lambda s: not _parses(s, float)).map(lambda s: ([f"--budget-hours={s}"], "--budget-hours")),
    st.integers(max_value=0).map(lambda n: ([f"--per-cell={n}"], "eval.per_cell")),
    st.integers(max_value=0).map(lambda n: ([f"--max-trials={n}"], "--max-trials")),
    st.integers(max_value=0).map(lambda n: ([f"--num-cpus={n}"], "--num-cpus")),
    _not_in(("tiny", "paper")).map(lambda s: ([f"--preset={s}"], "--preset")),
    st.sampled_from([["--axis=train.lr"], ["--axis==1"], ["--axis=no.such_key=1"], ["--axis=train.lr="],
                     ["--axis=train.lr= , "], ["--axis=train.lr=1,2", "--axis=train.lr=3"]]).map(
        lambda argv: (argv, "--axis")),
    st.sampled_from(["abc", "-1", "0"]).map(lambda v: ([f"--axis=train.lr=1e-3,{v}"], "train.lr")),
    _OPTION.map(lambda s: ([s], s)),
)


@FUZZ
@given(flags=SWEEP_FLAGS)
def test_sweep_flags_are_refused_before_ray_starts(flags, no_ray, work):
    argv, culprit = flags
    sweep = load_sweep("fig10_k")
    storage = work / "sweep-storage"
    assert_refused(["--storage", str(storage), *argv], culprit, "sweep flags (before Ray)",
                   fn=lambda a: _sweep_main(sweep, a), prefixes=("abacus-ray sweep",), roots=[work])
    assert not storage.exists()


def _sweep_main(sweep, argv):
    from abacus_ray.cli.sweep import main as sweep_main

    return sweep_main(sweep, argv)


@pytest.mark.parametrize("argv, culprit", [
    (["--positions", "kerple"], "model.positions"),
    (["--positions", " , "], "--positions"),
    (["--positions", "abacus,fire", "--seeds", "-2"], "--seeds"),
    (["--storage", "{file}/sub"], "--storage"),
    (["--storage", "{file}"], "--storage"),
])
def test_figure_flags_and_storage_are_refused_before_ray_starts(argv, culprit, no_ray, work):
    f = fresh_dir(work) / "a-file"
    f.write_text("x")
    argv = [a.format(file=f) for a in argv]
    if "--storage" not in argv:
        argv += ["--storage", str(work / "sweep-storage")]
    sweep = load_sweep("fig3_embeddings")
    assert_refused(argv, culprit, "sweep flags (before Ray)", fn=lambda a: _sweep_main(sweep, a),
                   prefixes=("abacus-ray sweep",), roots=[work])


@pytest.mark.parametrize("argv, culprit", [
    (["{missing}"], "RESULTS"),
    (["{empty}"], "RESULTS"),
    (["{file}"], "RESULTS"),
    (["{runs}", "--grid", "diagonal:0"], "--diagonal"),
    (["{runs}", "--grid", "nope"], "--grid"),
    (["{runs}", "--grid", "diagonal:200"], "model.abacus_table"),
    (["{runs}", "--per-cell", "0"], "eval.per_cell"),
    (["{runs}", "--per-cell", "x"], "--per-cell"),
    (["{runs}", "--num-cpus", "0"], "--num-cpus"),
    (["{runs}", "--out", "{file}"], "--out"),
    (["{runs}", "--out", "{file}/sub"], "--out"),
    (["{runs}", "--out", "{foreign}"], "{foreign}"),
    (["{runs}", "--bogus"], "--bogus"),
])
def test_eval_all_refuses_bad_input_before_ray_starts(argv, culprit, ckpt, no_ray, work):
    root = fresh_dir(work)
    (root / "empty").mkdir()
    (root / "a-file").write_text("x")
    shutil.copytree(ckpt, root / "runs" / "run-a" / "step-000000001")
    foreign = root / "foreign"
    foreign.mkdir()
    (foreign / "part-0.parquet").write_bytes(b"PAR1 not really")
    fill = {"missing": root / "missing", "empty": root / "empty", "file": root / "a-file", "runs": root / "runs",
            "foreign": foreign}
    argv = [a.format(**fill) for a in argv]
    assert_refused(["eval-all", *argv], culprit.format(**fill), "eval-all flags (before Ray)", roots=[root])
    assert not (root / "runs" / "results").exists()
