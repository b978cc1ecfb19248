"""The results dataset: a versioned Parquet schema, atomic part files, idempotent re-evaluation.

Layout of a results directory (a local path or an object-store URI, through `abacus_ray.storage`):

    RESULTS/part-<keys-hash>.parquet           one row per (model, task, cell, eval settings)
                                               (`CELL_SCHEMA`)
    RESULTS/samples/part-<keys-hash>.parquet   optional per-problem rows (`SAMPLE_SCHEMA`)

Every flush writes a new part atomically (a local disk: temporary file + rename; an object store:
one PUT), so a reader (or a run killed mid-write) never sees half a file; readers only read
`part-*.parquet`. Parts are never rewritten, which lets many evaluators (Ray Data actors) write into
one directory at once.

Two writers on one RESULTS (two `eval`s, a rerun beside a running sweep) leave each key once, with
no lock file (none works on an object store): a part is named after the keys it holds, so the same
cells written twice are one object; a writer re-lists the directory before every write and drops
rows whose key has appeared since (`KeyIndex`); and every reader keeps the first row of a key in
part-name order, for the rare race that leaves two parts with one key. A part that cannot be read
(truncated, garbage bytes) is named in a warning and skipped: the rest stays readable and a rerun
scores its cells again.

The key of a cell row is `KEY`: (model_id, task, i, j, per_cell, eval_seed, recurrences,
require_eos, scoring). A rerun skips cells whose key is present. The engine (teacher / kv / naive)
and the precision are *not* in the key: the engines agree problem by problem (the equivalence
tests), so a cell scored once is done. `require_eos` is (it changes the sorting metric), and so is
`scoring` (`SCORINGS`: the index-hint rule); `recurrences` is the resolved test-time depth. Schema
version 2 added `scoring`; version-1 parts read as `scoring = "exact"`, the only rule there was.

Column names: the core columns below, plus one column per flattened `ExperimentConfig` field of the
evaluated checkpoint (`model.positions`, `model.max_k`, `task.train_max_len`, `seed`, ...), except
the `eval.*` section, which described how the model was *meant* to be evaluated; the row's own
columns say how it was.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import sys
import types
import typing
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from abacus_ray import storage
from abacus_ray.config import ExperimentConfig
from abacus_ray.config.dicts import flatten
from abacus_ray.storage import Location
from abacus_ray.text import one_line

SCHEMA_VERSION = 2
# "exact": every answer token, hints and EOS included, must be the target's (the official rule for
# every task but index hints); "digits": hint symbols are dropped from the output and the target and
# the digits + EOS compared, as the official index-hint evaluation does (docs/fidelity.md).
SCORINGS = ("exact", "digits")
# Key columns added after schema version 1, with the value every older row had.
ADDED_KEYS = {"scoring": "exact"}
SAMPLES_DIR = "samples"
PART_GLOB = "part-*.parquet"

KEY = ("model_id", "task", "i", "j", "per_cell", "eval_seed", "recurrences", "require_eos",
       "scoring")
# Columns every cell part has held since schema version 1: a file without them is not ours.
REQUIRED = (*(k for k in KEY if k not in ADDED_KEYS), "region", "n", "n_correct", "accuracy")
SAMPLE_KEY = (*KEY, "index")

_CORE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("schema_version", pa.int32()),
    ("model_id", pa.string()),
    ("run_id", pa.string()),  # optional: training run / sweep name
    ("trial_id", pa.string()),  # optional: Ray Tune trial id
    ("checkpoint", pa.string()),  # where the weights were read (informational)
    ("task", pa.string()),
    ("i", pa.int64()),
    ("j", pa.int64()),
    ("region", pa.string()),
    ("n_train", pa.int64()),
    ("n", pa.int64()),  # problems scored (bitwise OR cells hold min(i, j))
    ("n_correct", pa.int64()),
    ("accuracy", pa.float64()),  # n_correct / n, a fraction in [0, 1]
    # first answer token right: sorting's "min. elem. only" (Table 2)
    ("n_first_correct", pa.int64()),
    # wrong answers by class (evaluation/errors.py; schema version 2)
    ("n_carry_errors", pa.int64()),
    ("n_length_errors", pa.int64()),
    ("n_other_errors", pa.int64()),
    # JSON list: wrong problems per answer position of the first wrong token
    ("first_wrong_counts", pa.string()),
    # the cell's first wrong problem: prompt, answer, where, what, class
    ("error_example", pa.string()),
    ("per_cell", pa.int64()),  # problems requested per cell
    ("eval_seed", pa.int64()),
    ("engine", pa.string()),
    ("recurrences", pa.int64()),
    ("require_eos", pa.bool_()),
    ("scoring", pa.string()),  # SCORINGS: how a problem's answer was compared (schema version 2)
    ("precision", pa.string()),  # the numeric precision the model ran in: fp32, bf16, tf32, fp16
    ("seconds", pa.float64()),
    ("device", pa.string()),
    # which evaluator produced the row ("pool:host:node:pid" under Ray Data; node = the first 8 hex
    # digits of the Ray node id), optional
    ("worker", pa.string()),
    ("evaluated_at", pa.string()),  # ISO-8601 UTC
]
CORE_COLUMNS = tuple(name for name, _ in _CORE_FIELDS)

SAMPLE_SCHEMA = pa.schema([
    ("schema_version", pa.int32()),
    ("model_id", pa.string()),
    ("task", pa.string()),
    ("i", pa.int64()),
    ("j", pa.int64()),
    ("per_cell", pa.int64()),
    ("eval_seed", pa.int64()),
    ("recurrences", pa.int64()),
    ("require_eos", pa.bool_()),
    ("scoring", pa.string()),
    ("index", pa.int64()),  # problem number within the cell
    ("prompt", pa.string()),  # model text format: reversed operands, ends with '='
    ("target", pa.string()),  # reversed answer, no EOS
    ("prediction", pa.string()),  # greedy output up to (excluding) EOS
    ("stopped", pa.bool_()),  # the decoder emitted EOS within its token limit
    ("correct", pa.bool_()),
    # answer position of the first wrong token (len(target) = EOS); -1 if correct
    ("first_wrong", pa.int64()),
    ("first_correct", pa.bool_()),
    ("error", pa.string()),  # carry | length | other (evaluation/errors.py); null if correct
    ("engine", pa.string()),
])

# `eval --problems FILE`: one row per line of a problem file (evaluation/problem_file.py) in
# RESULTS/problems/; the file's cells also get the usual cell rows, with per_cell = 0 (no problems
# were generated), so they never share a key with a grid's cells.
PROBLEMS_DIR = "problems"
PROBLEM_SCHEMA = pa.schema([
    ("schema_version", pa.int32()),
    ("model_id", pa.string()),
    ("name", pa.string()),  # the model's config name (an imported model: its source)
    ("run_id", pa.string()),
    ("problems", pa.string()),  # "<file name> sha256:<first 12 hex of the file's sha256>"
    ("line", pa.int64()),  # 1-based line number in the file
    ("problem", pa.string()),  # the line as written, natural digit order
    ("task", pa.string()),
    ("i", pa.int64()),  # the cell it falls into
    ("j", pa.int64()),
    ("answer", pa.string()),  # the true answer, natural order
    ("prediction", pa.string()),  # the greedy output in natural order (hint symbols dropped)
    ("prompt", pa.string()),  # model text format
    ("target", pa.string()),  # model text format, no EOS
    ("output", pa.string()),  # greedy output in model format up to (excluding) EOS
    ("stopped", pa.bool_()),
    ("correct", pa.bool_()),
    ("first_wrong", pa.int64()),  # answer position of the first wrong token; -1 if correct
    ("error", pa.string()),  # carry | length | other; null if correct
    ("engine", pa.string()),
    ("eval_seed", pa.int64()),  # seeds the cell's initial-state noise, as on the grid
    ("recurrences", pa.int64()),
    ("scoring", pa.string()),
])


def _arrow_type(tp: Any) -> pa.DataType:
    """Arrow type of a config field annotation (optional fields are nullable anyway)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        tp = args[0]
    if tp is bool:
        return pa.bool_()
    if tp is int:
        return pa.int64()
    if tp is float:
        return pa.float64()
    return pa.string()  # str, and tuples stored as JSON text


def _config_fields(cls: type, prefix: str = "") -> list[tuple[str, pa.DataType]]:
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = hints[f.name]
        key = f"{prefix}{f.name}"
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            if key == "eval":
                continue
            out.extend(_config_fields(tp, key + "."))
        else:
            out.append((key, _arrow_type(tp)))
    return out


@functools.cache  # the config's fields are fixed for a process; every part written asks for it
def cell_schema() -> pa.Schema:
    """Core columns + one column per flattened `ExperimentConfig` field (today's config)."""
    cfg_fields = [(k, t) for k, t in _config_fields(ExperimentConfig) if k not in CORE_COLUMNS]
    return pa.schema(_CORE_FIELDS + cfg_fields)


def config_columns(cfg) -> dict[str, Any]:
    """Flattened config values of an `ExperimentConfig` (or its dict), `eval.*` left out."""
    d = cfg if isinstance(cfg, dict) else cfg.to_dict()
    out = {}
    for k, v in flatten(d).items():
        if k.startswith("eval.") or k in CORE_COLUMNS:
            continue
        out[k] = json.dumps(v) if isinstance(v, (list, tuple)) else v
    return out


# --- writing --------------------------------------------------------------------------------------

def _table(rows: Sequence[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows -> table with `schema`; columns the schema lacks (a newer config) are appended as
    inferred."""
    extra = sorted({k for r in rows for k in r} - set(schema.names))
    cols = {name: [r.get(name) for r in rows] for name in schema.names}
    arrays = [pa.array(cols[f.name], type=f.type) for f in schema]
    fields = list(schema)
    for name in extra:
        arr = pa.array([r.get(name) for r in rows])
        arrays.append(arr)
        fields.append(pa.field(name, arr.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def write_table(loc: Location, table: pa.Table) -> Location:
    """Write `table` to `loc` atomically (`storage.write_parquet`)."""
    return storage.write_parquet(loc, table)


def part_name(table: pa.Table) -> str:
    """`part-<hash of the keys it holds>.parquet`: the same cells written twice are one file, not
    two."""
    names = [k for k in KEY if k in table.column_names]
    if not names or table.num_rows == 0:
        return f"part-{uuid.uuid4().hex}.parquet"
    keys = sorted({tuple(map(str, k))
                   for k in zip(*(table.column(k).to_pylist() for k in names), strict=True)})
    return f"part-{hashlib.sha256(repr(keys).encode()).hexdigest()[:32]}.parquet"


def write_part(directory: Location, table: pa.Table) -> Location:
    """Write `table` as a new part of `directory` atomically, named after its keys (`part_name`)."""
    return write_table(directory / part_name(table), table)


def rows_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Cell rows -> an Arrow table of the versioned cell schema (what a part file holds)."""
    return _table([{"schema_version": SCHEMA_VERSION, **r} for r in rows], cell_schema())


def write_cells(directory: Location,
                rows: Sequence[dict[str, Any]]) -> Location | None:
    """Flush cell rows as one part (nothing written for no rows)."""
    if not rows:
        return None
    return write_part(directory, rows_table(rows))


def write_samples(directory: Location,
                  rows: Sequence[dict[str, Any]]) -> Location | None:
    if not rows:
        return None
    table = _table([{"schema_version": SCHEMA_VERSION, **r} for r in rows], SAMPLE_SCHEMA)
    return write_part(directory / SAMPLES_DIR, table)



def write_problems(results: Location, rows: Sequence[dict[str, Any]]):
    """Flush problem-file rows as one part of RESULTS/problems (nothing written for no rows)."""
    if not rows:
        return None
    table = _table([{"schema_version": SCHEMA_VERSION, **r} for r in rows], PROBLEM_SCHEMA)
    return write_part(results / PROBLEMS_DIR, table)

def retire_shorter(directory: Location, archive: Location, steps: dict[str, int]) -> int:
    """Move the cell rows of models a sweep has since trained further out of `directory` into
    parts of `archive`: rows whose `name` is a key of `steps` (a trial's name -> the steps it now
    trains) and whose `train.max_steps` is fewer. Each touched part is rewritten as its kept rows
    and its retired ones before it is deleted, so a crash leaves every row readable once (a rerun
    finishes the move). Returns the rows moved."""
    moved = 0
    for f in part_files(directory):
        table = storage.read_parquet(f)
        if "name" not in table.column_names or "train.max_steps" not in table.column_names:
            continue
        mask = pa.array([n in steps and s is not None and s < steps[n] for n, s in zip(
            table.column("name").to_pylist(), table.column("train.max_steps").to_pylist(),
            strict=True)])
        n = pc.sum(mask).as_py() or 0
        if not n:
            continue
        write_part(archive, table.filter(mask))
        kept = table.filter(pc.invert(mask))
        if kept.num_rows:
            write_part(directory, kept)
        storage.delete(f)
        moved += n
    return moved


# --- reading --------------------------------------------------------------------------------------

def part_files(directory: Location) -> list[Location]:
    """The `part-*.parquet` entries of a results directory, in name order (one listing)."""
    return storage.glob(directory, PART_GLOB)


def _check_dir(loc: Location) -> list[Location]:
    if not storage.exists(loc):
        raise FileNotFoundError(2, "no such results directory", loc.uri)
    if not storage.is_dir(loc):
        raise NotADirectoryError(20, "is not a directory", loc.uri)
    return part_files(loc)


_WARNED: set[str] = set()


def _skip(where: str, f: Location, reason: str) -> None:
    """Name an unreadable part once per process; its cells count as missing, so a rerun scores
    them again."""
    if f.uri not in _WARNED:
        _WARNED.add(f.uri)
        print(f"warning: {where}: {f.name} is not a readable Parquet file ({reason}); skipped "
              "(its cells count as missing: a rerun evaluates them again)", file=sys.stderr)


def _read_one(f: Location, columns: Sequence[str] | None, where: str,
              required: Sequence[str]) -> pa.Table:
    """One part's table; a ValueError for a file that is Parquet but not ours or too new, an
    OSError / ArrowException for one that cannot be read at all."""
    parquet = storage.open_parquet(f)  # one GET on an object store, however many columns are read
    schema = parquet.schema_arrow
    if "schema_version" not in schema.names:
        raise ValueError(f"{where}: {f.name} is not an abacus-ray results file "
                         "(no schema_version column)")
    missing = [c for c in required if c not in schema.names]
    if missing:
        raise ValueError(f"{where}: {f.name} is not an abacus-ray results file "
                         f"(no {missing[0]} column)")
    _check_types(schema, f, where)
    cols = None if columns is None else [c for c in columns if c in schema.names]
    t = _with_added_keys(parquet.read(columns=cols), columns)
    if columns is None or "schema_version" in columns:
        versions = set(t.column("schema_version").to_pylist())
        if any(v is None or v > SCHEMA_VERSION for v in versions):
            raise ValueError(f"{where}: {f.name} has schema_version {sorted(map(str, versions))}; "
                             f"this abacus-ray reads <= {SCHEMA_VERSION}")
    _check_fractions(t, f, where)
    return t


def _kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    return str(t)


def _check_types(schema: pa.Schema, f: Location, where: str) -> None:
    """Every core column a part holds is of its kind (integer, float, string, bool), so a count
    written as text is refused naming it instead of failing deep inside pandas."""
    for name, want in _CORE_FIELDS:
        if name in schema.names and _kind(got := schema.field(name).type) != _kind(want):
            if pa.types.is_null(got):  # a column of nulls only: no value of the wrong kind
                continue
            raise ValueError(f"{where}: {f.name} is not an abacus-ray results file (column {name} "
                             f"holds {got}, not {_kind(want)})")


def _check_fractions(t: pa.Table, f: Location, where: str) -> None:
    """An accuracy is a fraction (n_correct / n): one outside [0, 1] would print as 500 %."""
    if "accuracy" not in t.column_names or t.num_rows == 0:
        return
    bounds = pc.min_max(t.column("accuracy"))
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    bad = next((v for v in (low, high) if v is not None and not 0.0 <= v <= 1.0), None)
    if bad is not None:
        raise ValueError(f"{where}: {f.name} holds an accuracy of {bad:.6g}, not a fraction in "
                         "[0, 1]; not an abacus-ray results file")


def _read_parts(files: Iterable[Location], columns: Sequence[str] | None, where: str,
                required: Sequence[str] = (), *, known_good: bool = False) -> pa.Table | None:
    """Concatenated parts (None if there were none). A part that cannot be read at all is skipped
    with a warning (`_skip`), unless no part can be read: then the directory is not ours and the
    error names it. A readable Parquet file that is not ours (a missing `required` column) or too
    new is refused. `known_good`: the directory already gave readable parts (an index refreshing),
    so skip regardless."""
    tables, broken = [], []
    for f in files:
        try:
            tables.append(_read_one(f, columns, where, required))
        # garbage bytes, truncated, a directory named part-*.parquet
        except (pa.ArrowException, OSError, storage.NotParquetError) as e:
            broken.append((f, one_line(str(e), 200)))
    if broken and not tables and not known_good:
        f, reason = broken[0]
        raise ValueError(f"{where}: {f.name} is not a readable Parquet file ({reason})")
    for f, reason in broken:
        _skip(where, f, reason)
    return pa.concat_tables(tables, promote_options="permissive") if tables else None


def first_per_key(t: pa.Table, key: Sequence[str] = KEY) -> pa.Table:
    """The table with one row per key, the first in part-name order (two writers' rare race)."""
    names = [k for k in key if k in t.column_names]
    seen: dict[tuple, int] = {}
    for n, k in enumerate(zip(*(t.column(c).to_pylist() for c in names), strict=True)):
        seen.setdefault(k, n)
    return t if len(seen) == t.num_rows else t.take(sorted(seen.values()))


def _with_added_keys(t: pa.Table, columns: Sequence[str] | None) -> pa.Table:
    """An older part's table with the key columns added since (`ADDED_KEYS`) filled with their old
    value."""
    for name, value in ADDED_KEYS.items():
        if name not in t.column_names and (columns is None or name in columns):
            t = t.append_column(name, pa.array([value] * t.num_rows, pa.string()))
    return t


def read_cells_table(directory: Location,
                     columns: Sequence[str] | None = None) -> pa.Table:
    """All cell rows of a results directory, one per key (raises naming the directory if it holds
    none)."""
    files = _check_dir(directory)
    if not files:
        raise ValueError(f"{directory}: holds no abacus-ray results ({PART_GLOB} files); "
                         f"run `abacus-ray eval CHECKPOINT --out {directory}` first")
    wanted = None if columns is None else list(dict.fromkeys([*columns, *KEY]))
    t = first_per_key(_read_parts(files, wanted, str(directory), REQUIRED))
    return t if columns is None else t.select([c for c in columns if c in t.column_names])


def read_cells(directory: Location, columns: Sequence[str] | None = None):
    """All cell rows as a pandas DataFrame."""
    return read_cells_table(directory, columns).to_pandas()


def read_samples(directory: Location):
    """All per-problem rows as a pandas DataFrame (empty if none were written)."""
    loc = directory / SAMPLES_DIR
    files = part_files(loc)
    if not files:
        return SAMPLE_SCHEMA.empty_table().to_pandas()
    required = [k for k in SAMPLE_KEY if k not in ADDED_KEYS]
    return first_per_key(_read_parts(files, None, str(loc), required), SAMPLE_KEY).to_pandas()



def read_problems(directory: Location):
    """All problem-file rows of a results directory as a pandas DataFrame (empty if none)."""
    files = part_files(directory / PROBLEMS_DIR)
    if not files:
        return PROBLEM_SCHEMA.empty_table().to_pandas()
    return pa.concat_tables([storage.read_parquet(f) for f in files],
                            promote_options="permissive").to_pandas()

class KeyIndex:
    """The keys (`KEY`) present in a results directory, kept current by reading only parts not
    seen before: one listing per `refresh`, one read per new part. A writer refreshes before each
    write and drops rows whose key appeared since (another writer's)."""

    def __init__(self, directory: Location) -> None:
        self.loc = directory
        self.keys: set[tuple] = set()
        self.seen: set[str] = set()

    def refresh(self) -> set[tuple]:
        if not storage.exists(self.loc):
            return self.keys
        new = [f for f in part_files(self.loc) if f.path not in self.seen]
        if new:
            t = _read_parts(new, [*KEY, "schema_version"], str(self.loc), REQUIRED,
                            known_good=bool(self.keys))
            self.seen.update(f.path for f in new)
            if t is not None:
                self.keys.update(zip(*(t.column(k).to_pylist() for k in KEY), strict=True))
        return self.keys

    def wrote(self, part: Location, keys: Iterable[tuple]) -> None:
        """Record a part this writer wrote itself (not read back on the next refresh)."""
        self.seen.add(part.path)
        self.keys.update(keys)

    def fresh(self, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows whose key is not present yet (after a refresh)."""
        have = self.refresh()
        return [r for r in rows if key_of(r) not in have]


def done_keys(directory: Location) -> set[tuple]:
    """Keys (`KEY`) of every cell already in the directory; empty if it does not exist yet."""
    return set(KeyIndex(directory).refresh())


def key_of(row: dict[str, Any]) -> tuple:
    return tuple(row[k] for k in KEY)
