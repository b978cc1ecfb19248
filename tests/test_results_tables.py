"""Results as tables: docs/results-schema.md documents every column, and its pandas,
DuckDB and Polars one-liners read a results directory that mixes schema versions 1 and 2."""

import glob
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from abacus_ray.evaluation.results import (
    SAMPLE_SCHEMA,
    SCHEMA_VERSION,
    cell_schema,
    config_columns,
    rows_table,
    write_cells,
    write_part,
    write_samples,
)
from abacus_ray.storage import on_disk
from tests.test_eval_results import row

DOC = Path(__file__).resolve().parents[1] / "docs" / "results-schema.md"
ADDED = ["scoring", "n_carry_errors", "n_length_errors", "n_other_errors", "first_wrong_counts", "error_example"]


def test_every_core_column_is_documented():
    text = DOC.read_text()
    assert f"# Results schema (version {SCHEMA_VERSION})" in text
    documented = set(re.findall(r"`([a-z_]+)`", text))
    config = set(config_columns(row()))
    for name in [f.name for f in cell_schema() if f.name not in config] + SAMPLE_SCHEMA.names:
        assert name in documented, name


@pytest.fixture(params=["old first", "new first"])
def results(request, tmp_path):
    """A v1 part (no columns of version 2) and a v2 part, named so either sorts first, and samples."""
    old = rows_table([row(i=1, j=j) for j in (1, 2)]).drop_columns(ADDED)
    old = old.set_column(0, "schema_version", pa.array([1, 1], pa.int32()))
    write_part(on_disk(tmp_path), old)
    write_cells(on_disk(tmp_path), [row(i=2, j=2, scoring="digits", n_carry_errors=3)])
    parts = sorted(tmp_path.glob("part-*.parquet"), key=lambda p: pa.parquet.read_schema(p).names.count("scoring"))
    for n, p in enumerate(parts if request.param == "old first" else parts[::-1]):
        p.rename(tmp_path / f"part-{n}.parquet")
    write_samples(on_disk(tmp_path), [{"model_id": "m1", "task": "add", "i": 1, "j": 1, "per_cell": 10, "eval_seed": 0,
                              "recurrences": 1, "require_eos": True, "scoring": "exact", "index": 0, "prompt": "1+2=",
                              "target": "3", "prediction": "3", "stopped": True, "correct": True, "first_wrong": -1,
                              "first_correct": True, "engine": "kv"}])
    return tmp_path


def one_liners() -> dict[str, str]:
    """The README's and the schema doc's one-liners, as written there."""
    block = DOC.read_text().split("```python", 1)[1].split("```", 1)[0]
    return {m.group(1): m.group(0) for m in re.finditer(r"^cells = (pd|duckdb|pl)\..*$", block, re.M)}


def test_the_documented_one_liners_read_every_row_and_column(results):
    lines = one_liners()
    assert set(lines) == {"pd", "duckdb", "pl"}
    import duckdb
    import polars as pl
    for name, line in lines.items():
        scope = {"glob": glob, "pd": pd, "duckdb": duckdb, "pl": pl}
        exec(line.replace("results/demo/fig10_k/results", str(results)), scope)
        cells = scope["cells"]
        df = cells.to_pandas() if name == "pl" else cells
        assert len(df) == 3, name
        assert set(ADDED) <= set(df.columns), name
        by_cell = {(int(i), int(j)): (s, c) for i, j, s, c in zip(df["i"], df["j"], df["scoring"], df["n_carry_errors"],
                                                                      strict=True)}
        assert by_cell[(2, 2)] == ("digits", 3), name
        assert pd.isna(by_cell[(1, 1)][0]) and pd.isna(by_cell[(1, 2)][1]), name  # null in the old part
    readme = (DOC.parents[1] / "README.md").read_text()
    for line in lines.values():
        assert line in readme
