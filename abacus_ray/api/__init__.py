"""The Python API: what every `abacus-ray` command runs, as functions that return data.

    from abacus_ray import api

    cfg = api.preset("tiny", {"train.max_steps": 200})
    trained = api.train(cfg, "runs/add")                     # Trained: checkpoint, model_id
    scored = api.evaluate([trained.checkpoint], "runs/add-eval", cells="1-8x1-8")
    df = scored.cells()                                      # one row per (i, j) cell
    found = api.sweep("fig10_k", storage="results", tracking="none",
                      overrides={"train.max_steps": 200})   # SweepResult, trained on Ray
    print(found.conclusion, found.cells().shape)
    print(api.verdict(found.results))                        # Verdict: shown, contradicted, ...

Paths and object-store URIs (s3://, gs://) are taken wherever a location is. Bad input is one
`ValueError` (or an `OSError` naming its path) raised before work starts, its message naming the
option as the command line spells it. The command line parses its flags, calls these and prints
what they return (docs/guide.md, "Python API").

| name | what it does | returns |
|---|---|---|
| `preset(name, overrides)` | a config preset with overrides | `ExperimentConfig` |
| `train(config, out, ...)` | train (or `resume=True`) one model on this machine | `Trained` |
| `evaluate(checkpoints, out, ...)` | score checkpoints on a grid into Parquet | `Evaluated` |
| `score_problems(checkpoint, file, out)` | score one model on a problem file | `Scored` |
| `evaluate_all(results, ...)` | every model under a results root, on Ray | `ScoredTarget` list |
| `load_sweep(name)` | a figure's sweep or a sweep file's `SWEEP` | `Sweep` |
| `prepare(sweep, SweepOptions(...))` | a sweep checked, expanded, not started | `SweepPlan` |
| `run(plan)` | train, score and draw a prepared sweep on Ray | `SweepResult` |
| `sweep(name, **options)` | `run(prepare(...))` | `SweepResult` |
| `cells(results)` | every cell row under a results root | `pandas.DataFrame` |
| `verdict(results)` | one sweep's claim judged on its results | `Verdict` or None |
| `claims_table(root)` | every sweep's verdict under a storage root | Markdown text |
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> (module under abacus_ray, attribute): loaded on first use, so that importing the API
# (as the command line does for its checks) loads neither torch nor Ray
_NAMES = {
    "preset": ("config", "preset"),
    "ExperimentConfig": ("config", "ExperimentConfig"),
    "train": ("api.runs", "train"), "Trained": ("api.runs", "Trained"),
    "evaluate": ("api.runs", "evaluate"), "Evaluated": ("api.runs", "Evaluated"),
    "score_problems": ("api.runs", "score_problems"), "Scored": ("api.runs", "Scored"),
    "evaluate_all": ("api.evaluate_all", "evaluate_all"),
    "ScoredTarget": ("api.evaluate_all", "ScoredTarget"),
    "load_sweep": ("api.sweeps", "load_sweep"), "SweepOptions": ("api.sweeps", "SweepOptions"),
    "prepare": ("api.sweeps", "prepare"), "SweepPlan": ("api.sweeps", "SweepPlan"),
    "run": ("api.sweeps", "run"), "sweep": ("api.sweeps", "sweep"),
    "SweepResult": ("api.sweeps", "SweepResult"),
    "cells": ("api.verdicts", "cells_of"), "verdict": ("api.verdicts", "verdict_of"),
    "claims_table": ("api.verdicts", "claims_of"),
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'abacus_ray.api' has no attribute {name!r}")
    module, attribute = _NAMES[name]
    return getattr(importlib.import_module(f"abacus_ray.{module}"), attribute)
