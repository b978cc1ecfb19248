"""What each evaluated model cost: parameters, steps, samples and device-hours of budget spent.

The cell rows name the checkpoint they were read from; its `meta.json` (written by
`model.checkpoint.save_checkpoint`) holds the counters. When the checkpoint is not reachable from
here (evaluated on another node, moved, deleted) the parameter count is still known: the model is
rebuilt from the row's config columns on the `meta` device, which allocates no memory. Anything that
cannot be recovered is left empty rather than guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from abacus_ray import storage
from abacus_ray.config import ExperimentConfig
from abacus_ray.config.dicts import unflatten
from abacus_ray.model.checkpoint import META_FILE, located
from abacus_ray.model.transformer import ArithmeticTransformer
from dashboards.data import clean, config_columns


@dataclass(frozen=True)
class ModelInfo:
    params: int | None = None
    step: int | None = None
    samples: int | None = None
    device_hours: float | None = None
    budget_fraction: float | None = None
    source: str = "none"  # "meta.json", "config" (rebuilt on the meta device) or "none"


def read_meta(checkpoint: Any) -> dict[str, Any] | None:
    """`meta.json` beside a checkpoint's weights, or None if it cannot be read."""
    if not isinstance(checkpoint, str) or not checkpoint:
        return None
    try:  # a local path or an object-store URI, as the row records it
        return storage.read_json(located(checkpoint) / META_FILE, nan_ok=("loss",))
    except (OSError, ValueError):
        return None


def config_from_row(row: dict[str, Any]):
    """The `ExperimentConfig` a cell row was evaluated with, rebuilt from its flattened columns."""
    flat = {}
    for k, v in row.items():
        if "." not in k and k not in ("name", "seed"):  # core result columns, not config
            continue
        v = clean(v)
        if isinstance(v, str) and v.startswith("["):  # tuples are stored as JSON text
            try:
                v = json.loads(v)
            except ValueError:
                pass
        if v is not None:
            flat[k] = v
    return ExperimentConfig.from_dict(unflatten(flat))


def count_params(row: dict[str, Any]) -> int | None:
    """Parameters of the row's model, built on the meta device (no weights
    allocated); None if impossible."""
    try:
        cfg = config_from_row(row)
        with torch.device("meta"):
            return int(ArithmeticTransformer.for_experiment(cfg).num_params())
    except Exception:  # an old or foreign config: the table shows an empty cell instead
        return None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def model_info(row: dict[str, Any]) -> ModelInfo:
    """Counters from `meta.json` when reachable, else the parameter count from the config."""
    meta = read_meta(row.get("checkpoint"))
    if meta is not None and (meta.get("model_id") in (None, row.get("model_id"))):
        params = _int(meta.get("num_params"))
        return ModelInfo(
            params=params if params is not None else count_params(row),
            step=_int(meta.get("step")),
            samples=_int(meta.get("samples")),
            device_hours=_float(meta.get("device_hours")),
            budget_fraction=_float(meta.get("budget_fraction")),
            source="meta.json",
        )
    params = count_params(row)
    return ModelInfo(params=params, source="config" if params is not None else "none")


def model_infos(cells: pd.DataFrame) -> dict[str, ModelInfo]:
    """One `ModelInfo` per model id in the rows (each checkpoint read once)."""
    cols = ["model_id", "checkpoint", *config_columns(cells)]
    first = cells.drop_duplicates("model_id")[[c for c in cols if c in cells.columns]]
    return {r["model_id"]: model_info(r) for r in first.to_dict("records")}
