"""Reading a results tree for the dashboards: which Parquet directories, which sweep a row belongs
to, and the labels (architecture, block, run) the paper's figures are drawn by.

A *results tree* is what `abacus-ray dashboard RESULTS` accepts, as every command that reads results
does (`evaluation.locate.results_dirs`): a results directory itself (`part-*.parquet`), a sweep root
holding `results/`, or a storage root holding several sweep roots. Every row gets a `sweep` column:
the prefix of its `run_id` before the first '/' (sweep files name runs `fig10_k/max_k=6_seed=0`),
else the name of the sweep directory.

An *entry* is one evaluated model under one set of eval settings (`aggregate.MODEL_KEYS`): one
heatmap. A *group* is the set of entries that differ only in the training seed: one seed-mean
heatmap, one bar with its per-seed points.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd
import pyarrow.fs as pafs

from abacus_ray import storage
from abacus_ray.config.identity import EXECUTION_ONLY
from abacus_ray.config.model import architecture_name, block_name
from abacus_ray.evaluation.aggregate import MODEL_KEYS
from abacus_ray.evaluation.locate import read_each, results_dirs
from abacus_ray.evaluation.results import part_files, read_cells
from abacus_ray.model.checkpoint import located
from abacus_ray.storage import Location
from abacus_ray.sweep_dir import SweepDir

# Config columns that never define a condition: how a run ran (`EXECUTION_ONLY`, the fields a
# sweep's identity leaves out too), its own name and seed (a condition's seeds form one group),
# and where it ran (every `cluster.` field: runs on other machines are the same condition).
NOT_CONDITION = frozenset({"name", "seed", *EXECUTION_ONLY})
NOT_CONDITION_PREFIXES = ("cluster.",)
UNNAMED_SWEEP = "results"


def signature(results: Location) -> tuple:
    """What changes when an evaluation streams a new part in: (file, size, mtime) of every part."""
    try:
        dirs = results_dirs(results)
    except (ValueError, OSError):
        return ()
    out = []
    for d in dirs:
        for f in part_files(d):
            info = f.fs.get_file_info(f.path)
            if info.type == pafs.FileType.NotFound:  # replaced between listing and stat
                continue
            out.append((str(f), info.size, info.mtime_ns))
    return tuple(out)


def sweep_table(cells: pd.DataFrame, table: Callable[[SweepDir], Location]) -> pd.DataFrame | None:
    """A table the sweep of these cells keeps beside its results (`table`: its search table, its
    timeline), or None when the sweep wrote none. The results may sit on a local disk or in an
    object store: `results_dir` holds the `Location` each row was read from (`load_cells`)."""
    dirs: dict[str, Location] = {str(d): d for d in cells["results_dir"]}
    for uri in sorted(dirs):
        path = table(SweepDir.of(dirs[uri].parent))
        if storage.is_file(path):
            return storage.read_parquet(path).to_pandas()
    return None


def sweep_dir_name(results_dir: Location) -> str:
    """The sweep a results directory belongs to when its rows carry no sweep-style run id."""
    sweep = SweepDir.holding(results_dir)
    return sweep.name if sweep is not None else UNNAMED_SWEEP


def sweep_preset(results_dir: Location) -> str | None:
    """The preset recorded in the sweep root's `sweep.json` (written by the cluster driver), if
    there is one; a damaged one is a ValueError naming it."""
    sweep = SweepDir.of(results_dir.parent)
    return sweep.read_spec()["preset"] if storage.is_file(sweep.spec) else None


def arch_label(layers: Any, recurrences: Any, injection: Any) -> str:
    """The paper's architecture name of a results row
    (`config.model.architecture_name`); '?' if unknown."""
    return (
        "?"
        if _missing(layers) or _missing(recurrences)
        else architecture_name(recurrences, injection)
    )


def block_label(layers: Any, recurrences: Any) -> str:
    """`layers x recurrences` of a results row (`config.model.block_name`); '?' if unknown."""
    return "?" if _missing(layers) or _missing(recurrences) else block_name(layers, recurrences)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def clean(v: Any) -> Any:
    """A JSON- and key-safe scalar: NaN -> None, numpy scalars -> Python ones."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def config_columns(cells: pd.DataFrame) -> list[str]:
    """The flattened `ExperimentConfig` columns of the rows (dotted names,
    plus `name` and `seed`)."""
    return [c for c in cells.columns if "." in c or c in ("name", "seed")]


def condition_columns(cells: pd.DataFrame) -> list[str]:
    """Config columns that define an experimental condition (everything but `NOT_CONDITION` and
    the cluster's fields)."""
    return [c for c in config_columns(cells)
            if c not in NOT_CONDITION and not c.startswith(NOT_CONDITION_PREFIXES)]


def load_cells(results: Location) -> pd.DataFrame:
    """Every cell row under `results`, with `sweep`, `arch`, `block`, `run`, `entry` and `group`
    columns, and `results_dir`: the `Location` of the results directory it was read from."""
    frames = []
    for d, (df, preset) in read_each(results_dirs(results),
                                     lambda d: (read_cells(d), sweep_preset(d)), "dashboard"):
        fallback = sweep_dir_name(d)
        run_ids = (
            df["run_id"] if "run_id" in df.columns else pd.Series([None] * len(df), index=df.index)
        )
        df["sweep"] = [
            r.split("/", 1)[0] if isinstance(r, str) and "/" in r else fallback for r in run_ids
        ]
        df["preset"] = preset
        df["results_dir"] = pd.Series([d] * len(df), index=df.index, dtype=object)
        frames.append(df)
    cells = pd.concat(frames, ignore_index=True, sort=False) if len(frames) > 1 else frames[0]
    return label(cells)


def label(cells: pd.DataFrame) -> pd.DataFrame:
    """Add the derived label columns and integer `entry` / `group` ids (stable:
    sorted by their keys)."""
    cells = cells.copy()
    if "sweep" not in cells.columns:
        cells["sweep"] = UNNAMED_SWEEP
    get = lambda c: (  # noqa: E731
        cells[c] if c in cells.columns else pd.Series([None] * len(cells), index=cells.index)
    )
    layers, recs, inj = get("model.layers"), get("model.recurrences"), get("model.injection")
    cells["arch"] = [arch_label(a, b, c) for a, b, c in zip(layers, recs, inj, strict=True)]
    cells["block"] = [block_label(a, b) for a, b in zip(layers, recs, strict=True)]
    cells["run"] = _run_labels(cells)
    group_keys = ["sweep", *[k for k in MODEL_KEYS if k in cells.columns and k != "model_id"],
                  *condition_columns(cells)]
    cells["group"] = _ids(cells, group_keys)
    entry_keys = ["group", *(["seed"] if "seed" in cells.columns else []), "run", "model_id"]
    cells["entry"] = _ids(cells, entry_keys)
    return cells


def _run_labels(cells: pd.DataFrame) -> list[str]:
    """A readable run name per row: run_id, else the checkpoint it was read from (`abacus-ray eval`
    without --run-id), else the config's name, else the model id.

    One name per (sweep, model); a name two models of one sweep share gets the model id appended.
    """
    n = len(cells)
    cols = {c: [_text(v) for v in cells[c].tolist()] if c in cells.columns else [None] * n
            for c in ("run_id", "checkpoint", "name")}
    keys = list(zip(cells["sweep"].tolist(), cells["model_id"].tolist(), strict=True))
    names: dict[tuple, str] = {}
    for k, key in enumerate(keys):
        if key not in names:
            names[key] = (
                cols["run_id"][k]
                or checkpoint_label(cols["checkpoint"][k])
                or cols["name"][k]
                or str(key[1])[:12]
            )
    taken: dict[tuple, int] = {}
    for (sweep, _), name in names.items():
        taken[(sweep, name)] = taken.get((sweep, name), 0) + 1
    unique = {
        key: (f"{name} @{str(key[1])[:8]}" if taken[(key[0], name)] > 1 else name)
        for key, name in names.items()
    }
    return [unique[key] for key in keys]


def _text(v: Any) -> str | None:
    """A non-empty string, or None for a missing value (a Parquet null reads as None or NaN)."""
    v = clean(v)
    return None if v is None or str(v).strip() == "" else str(v)


def checkpoint_label(checkpoint: str | None) -> str | None:
    """A run name from the checkpoint a row records (a path or a URI): the last two parts of its
    path (`runs/tiny`, `tiny/checkpoint_000004`), enough to tell runs apart without the machine's
    directory prefix or a URI's query; None for text no `Location` is made of."""
    if not checkpoint:
        return None
    try:
        loc = located(checkpoint)
    except ValueError:  # StorageError: an unknown scheme, a refused query
        return None
    return "/".join(p for p in (loc.parent.name, loc.name) if p) or None


def _natural(v: Any) -> tuple:
    """Sort numbers as numbers, then text, then missing values."""
    v = clean(v)
    if v is None:
        return (2, 0.0, "")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def _ids(cells: pd.DataFrame, keys: list[str]) -> list[int]:
    """Dense integer ids of the distinct key tuples, in natural order of the tuples (None-safe)."""
    tuples = [
        tuple(_natural(v) for v in row)
        for row in zip(*(cells[k].tolist() for k in keys), strict=True)
    ]
    order = {t: n for n, t in enumerate(sorted(set(tuples)))}
    return [order[t] for t in tuples]


def sweeps(cells: pd.DataFrame) -> list[str]:
    return sorted(set(cells["sweep"]))
