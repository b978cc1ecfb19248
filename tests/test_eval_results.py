"""Results: Parquet schema and atomic parts, idempotent keys, aggregation and Wilson intervals."""

import math
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from abacus_ray.config import preset
from abacus_ray.evaluation.aggregate import (
    format_table,
    region_means,
    seed_spread,
    summary_table,
    wilson_interval,
    with_intervals,
)
from abacus_ray.evaluation.regions import region_of
from abacus_ray.evaluation.results import (
    KEY,
    SCHEMA_VERSION,
    cell_schema,
    config_columns,
    done_keys,
    read_cells,
    read_samples,
    write_cells,
    write_part,
    write_samples,
)
from abacus_ray.storage import on_disk


def row(model_id="m1", i=1, j=1, n_correct=5, n=10, seed=0, cfg=None, **kw):
    cfg = cfg or preset("tiny")
    base = config_columns(cfg) | {
        "model_id": model_id, "task": "add", "i": i, "j": j, "region": region_of("add", i, j, 5), "n_train": 5,
        "n": n, "n_correct": n_correct, "accuracy": n_correct / n, "n_first_correct": n_correct, "per_cell": n,
        "eval_seed": 0, "engine": "teacher", "recurrences": 1, "require_eos": True, "scoring": "exact", "precision": "fp32",
        "seconds": 0.01, "device": "cpu", "evaluated_at": "2024-01-01T00:00:00+00:00"}
    base["seed"] = seed
    return base | kw


def test_schema_has_core_and_flattened_config_columns():
    schema = cell_schema()
    for col in ("schema_version", "model_id", "run_id", "trial_id", "task", "i", "j", "region", "n_train", "n",
                "n_correct", "accuracy", "eval_seed", "engine", "recurrences", "seconds", "device",
                "model.positions", "model.max_k", "task.train_max_len", "seed", "train.max_steps"):
        assert col in schema.names, col
    assert not any(n.startswith("eval.") for n in schema.names)
    assert schema.field("model.max_k").type == pa.int64()
    assert schema.field("train.max_steps").type == pa.int64()  # optional int stays an int column
    assert schema.field("model.positions").type == pa.string()
    assert set(KEY) <= set(schema.names)


def test_write_read_roundtrip_and_keys(tmp_path):
    rows = [row(i=i, j=j, n_correct=i + j) for i in (1, 2) for j in (1, 3)]
    p = write_cells(on_disk(tmp_path), rows)
    assert p.name.startswith("part-") and p.suffix == ".parquet"
    assert write_cells(on_disk(tmp_path), []) is None
    df = read_cells(on_disk(tmp_path))
    assert len(df) == 4 and set(df["schema_version"]) == {SCHEMA_VERSION}
    assert df.loc[(df.i == 2) & (df.j == 3), "n_correct"].item() == 5
    assert df["model.positions"].iloc[0] == "abacus" and df["task.train_max_len"].iloc[0] == 5
    assert pd.isna(df["run_id"]).all()
    assert done_keys(on_disk(tmp_path)) == {("m1", "add", i, j, 10, 0, 1, True, "exact") for i in (1, 2) for j in (1, 3)}
    assert done_keys(on_disk(tmp_path / "missing")) == set()
    write_cells(on_disk(tmp_path), [row(model_id="m2", i=9, j=9)])  # a second part is read too
    assert len(read_cells(on_disk(tmp_path))) == 5 and len(done_keys(on_disk(tmp_path))) == 5


def test_version_1_parts_stay_readable_and_say_exact_scoring(tmp_path):
    """Parts written before the index-hint scoring rule (schema 1, no `scoring` column) read as "exact",
    the rule that produced them, so a rerun under the official digits rule scores those cells again."""
    old = [row(i=1, j=j) for j in (1, 2)]
    for r in old:
        del r["scoring"]
    table = pa.Table.from_pylist([{"schema_version": 1, **r} for r in old])
    assert "scoring" not in table.column_names
    write_part(on_disk(tmp_path), table)
    write_cells(on_disk(tmp_path), [row(i=2, j=2, scoring="digits")])
    df = read_cells(on_disk(tmp_path))
    assert sorted(zip(df.i, df.j, df.scoring, df.schema_version, strict=True)) == [(1, 1, "exact", 1), (1, 2, "exact", 1),
                                                                      (2, 2, "digits", SCHEMA_VERSION)]
    assert done_keys(on_disk(tmp_path)) == {("m1", "add", 1, 1, 10, 0, 1, True, "exact"),
                                   ("m1", "add", 1, 2, 10, 0, 1, True, "exact"),
                                   ("m1", "add", 2, 2, 10, 0, 1, True, "digits")}


def test_parts_are_atomic_and_readers_ignore_temporaries(tmp_path):
    write_cells(on_disk(tmp_path), [row()])
    # a writer killed mid-write leaves only a temporary, which readers never look at
    (tmp_path / ".tmp-part-dead.parquet").write_bytes(b"PAR1 half a file")
    (tmp_path / "notes.txt").write_text("not a part")
    assert len(read_cells(on_disk(tmp_path))) == 1
    assert [f.name for f in tmp_path.iterdir() if f.name.startswith(".tmp")] == [".tmp-part-dead.parquet"]

    class Boom(Exception):
        pass

    table = pa.table({"schema_version": pa.array([1], pa.int32())})
    real = pq.write_table

    def failing(t, where, **kw):
        real(t, where, **kw)
        raise Boom

    pq.write_table = failing
    try:
        with pytest.raises(Boom):
            write_part(on_disk(tmp_path), table)
    finally:
        pq.write_table = real
    parts = sorted(f.name for f in tmp_path.glob("part-*.parquet"))
    assert len(parts) == 1  # the failed write published nothing and cleaned its temporary
    assert len([f for f in os.listdir(tmp_path) if f.startswith(".tmp")]) == 1


def test_samples_dataset(tmp_path):
    assert read_samples(on_disk(tmp_path)).empty
    write_samples(on_disk(tmp_path), [{"model_id": "m", "task": "add", "i": 1, "j": 1, "per_cell": 1, "eval_seed": 0,
                              "recurrences": 1, "require_eos": True, "index": 0, "prompt": "1+2=", "target": "3",
                              "prediction": "3", "stopped": True, "correct": True, "first_wrong": -1,
                              "first_correct": True, "engine": "kv"}])
    s = read_samples(on_disk(tmp_path))
    assert s["prompt"].tolist() == ["1+2="] and bool(s["correct"].iloc[0])
    assert (tmp_path / "samples").is_dir() and not list(tmp_path.glob("part-*"))  # not mixed with cell rows


def test_foreign_or_empty_directories_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nope")):
        read_cells(on_disk(tmp_path / "nope"))
    with pytest.raises(ValueError, match=f"^{tmp_path}: holds no abacus-ray results"):
        read_cells(on_disk(tmp_path))
    pq.write_table(pa.table({"x": [1]}), tmp_path / "part-foreign.parquet")
    with pytest.raises(ValueError, match="not an abacus-ray results file"):
        read_cells(on_disk(tmp_path))


def test_newer_schema_versions_are_refused(tmp_path):
    table = pa.table({"schema_version": pa.array([SCHEMA_VERSION + 1], pa.int32()), "model_id": ["m"]})
    pq.write_table(table, tmp_path / "part-new.parquet")
    with pytest.raises(ValueError, match="schema_version"):
        read_cells(on_disk(tmp_path))


def test_wilson_interval_known_values():
    lo, hi = wilson_interval(0, 100)
    assert lo == 0.0 and math.isclose(hi, 0.036994, abs_tol=1e-5)
    lo, hi = wilson_interval(50, 100)
    assert math.isclose(lo, 0.403832, abs_tol=1e-5) and math.isclose(hi, 0.596168, abs_tol=1e-5)
    lo, hi = wilson_interval(100, 100)
    assert math.isclose(lo, 0.963006, abs_tol=1e-5) and hi == 1.0
    lo, hi = wilson_interval([1, 9], [10, 10])
    assert lo[0] < 0.1 < hi[0] and lo[1] < 0.9 < hi[1]
    with pytest.raises(ValueError, match="^n: "):
        wilson_interval(1, 0)
    with pytest.raises(ValueError, match="^k: "):
        wilson_interval(11, 10)


def test_region_means_weight_cells_equally_and_seed_spread():
    rows = []
    for seed, model in ((0, "a"), (1, "b")):
        for i in range(1, 8):
            for j in range(1, 8):
                # model a: id 100 %, ood 0 %; model b: id 50 %, ood 10 %
                good = (i <= 5 and j <= 5)
                k = (10 if good else 0) if model == "a" else (5 if good else 1)
                rows.append(row(model_id=model, i=i, j=j, n_correct=k, seed=seed))
    rows.append(row(model_id="a", i=101, j=101, n_correct=3, n=100, per_cell=10))
    cells = pd.DataFrame(rows)
    means = region_means(cells, extra_keys=("seed", "name"))
    get = lambda m, v: means[(means.model_id == m) & (means.view == v)]  # noqa: E731
    assert get("a", "id")["accuracy"].item() == 1.0 and get("a", "id")["cells"].item() == 25
    assert get("a", "ood")["accuracy"].item() == 0.0 and get("a", "ood")["cells"].item() == 24
    assert math.isclose(get("a", "ood100plus")["accuracy"].item(), 0.03)
    assert math.isclose(get("b", "ood")["accuracy"].item(), 0.1)
    spread = seed_spread(means, ["name"])
    ood = spread[spread.view == "ood"].iloc[0]
    assert math.isclose(ood["mean"], 0.05) and ood["runs"] == 2
    assert math.isclose(ood["min"], 0.0) and math.isclose(ood["max"], 0.1)
    assert math.isclose(ood["std"], math.sqrt(2 * 0.05 ** 2))
    with pytest.raises(ValueError, match="^group_by: 'nope'"):
        seed_spread(means, ["nope"])
    table = summary_table(cells)
    assert list(table.columns[-4:]) == ["id", "ood", "ood100plus", "cells"]
    text = format_table(table)
    assert "100.0" in text and "ood100plus" in text
    ci = with_intervals(cells)
    assert (ci["acc_lo"] <= ci["accuracy"]).all() and (ci["accuracy"] <= ci["acc_hi"]).all()


def test_summary_has_one_row_per_model_even_with_distinct_names():
    """Regression: a pivot over (model_id, name) must not invent the cross product of ids and names."""
    cells = pd.DataFrame([row(model_id=m, name=name, i=i, j=1) for m, name in (("a", "run-a"), ("b", "run-b"))
                          for i in (1, 7)])
    table = summary_table(cells)
    assert sorted(zip(table["model_id"], table["name"], strict=True)) == [("a", "run-a"), ("b", "run-b")]
    assert table["id"].notna().all() and table["ood"].notna().all()
