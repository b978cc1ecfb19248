"""Fault 2: SIGKILL the sweep driver, rerun the same command; `Tuner.restore` finishes the sweep.

Each test then reruns or waits for recovery and checks that nothing was lost, nothing was done twice,
and no reader ever saw a half-written file (the tools: `tests/faults.py`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from faults import finish, kill_driver, start, subprocess_env, uninterrupted_scores, wait_for

from abacus_ray.storage import on_disk

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.scenario, pytest.mark.cost(120)]


SWEEP_STEPS = 60
SWEEP_CELLS = "cells:1-3x1-3"


def experiment_trials(tune_dir: Path) -> dict[str, dict] | None:
    """trial_id -> Tune's saved trial state (status, logdir) from the newest experiment-state snapshot."""
    states = sorted(tune_dir.glob("experiment_state-*.json"))  # named by session start; each sync rewrites all
    if not states:
        return None
    try:
        data = json.loads(states[-1].read_text())
    except (ValueError, OSError):  # being written
        return None
    trials = [json.loads(t[0]) for t in data["trial_data"]]
    return {t["trial_id"]: t for t in trials}


def file_sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def checkpoint_fingerprints(trial_dir: Path) -> dict[str, tuple]:
    """Every checkpoint of a function trial: its model id, weights hash and file mtimes."""
    out = {}
    for ckpt in sorted(trial_dir.glob("checkpoint_*")):
        meta = json.loads((ckpt / "meta.json").read_text())
        out[ckpt.name] = (meta["model_id"], meta["step"], file_sha256(ckpt / "model.pt"),
                          *(f.stat().st_mtime_ns for f in sorted(ckpt.iterdir())))
    return out


def test_killed_sweep_driver_resumes_through_tuner_restore(tmp_path):
    from abacus_ray.evaluation.results import KEY, read_cells

    storage = tmp_path / "storage"
    # three trials on 2 CPUs (the tiny Fig. 10 has two per seed): two train while the third waits, so
    # the kill lands with one finished and others not; batches of 64, as the test was timed; a steps
    # budget alone, so that the rerun can be held to what an uninterrupted run trains (fidelity.md)
    cmd = [sys.executable, "sweeps/fig10_k.py", "--preset", "tiny", "--seeds", "2", "--max-trials", "3",
           "--num-cpus", "2", "--set", "train.global_batch=64", "--set", "train.micro_batch=64",
           "--set", "train.budget_hours=none",
           "--storage", str(storage), "--set", f"train.max_steps={SWEEP_STEPS}", "--set", "cluster.trainer=function",
           "--set", "train.checkpoint_every_min=0.02", "--set", "eval.per_cell=3", "--grid", SWEEP_CELLS,
           "--no-dashboard"]
    # Tune snapshots its experiment state every >= 10 s by default; 1 s lets the kill land soon after the
    # snapshot that records a finished trial (what `Tuner.restore` trusts), while others still train.
    env = subprocess_env(TUNE_GLOBAL_CHECKPOINT_S="1")
    tune_dir = storage / "fig10_k" / "tune"
    log = tmp_path / "sweep.log"
    t0 = time.monotonic()
    proc = start(cmd, log, env)

    def one_finished():
        assert proc.poll() is None, f"the sweep ended before the kill:\n{log.read_text()[-3000:]}"
        trials = experiment_trials(tune_dir)
        if trials and any(t["status"] == "TERMINATED" for t in trials.values()):
            return trials
        return None

    trials = wait_for(one_finished, 300, "a finished trial in Tune's experiment state")
    family, left_core, left_agents = kill_driver(proc)
    t_kill = time.monotonic() - t0
    assert not left_core, f"Ray processes outlived the killed driver (an embedded Ray dies with it): {left_core}"
    finished = {tid for tid, t in trials.items() if t["status"] == "TERMINATED"}
    unfinished = {tid: t["status"] for tid, t in trials.items() if tid not in finished}
    prints = {tid: checkpoint_fingerprints(tune_dir / trials[tid]["relative_logdir"]) for tid in finished}
    assert all(prints.values()), "a finished trial without checkpoints"
    assert not (storage / "fig10_k" / "results").exists()  # killed while training

    t1 = time.monotonic()
    rerun_log = tmp_path / "rerun.log"
    out = finish(start(cmd, rerun_log, env), rerun_log, timeout=400)
    t_rerun = time.monotonic() - t1
    assert "fig10_k: resuming" in out

    after = experiment_trials(tune_dir)
    assert len(after) == 3 and set(trials) <= set(after), (sorted(trials), sorted(after))
    assert {t["status"] for t in after.values()} == {"TERMINATED"}
    for tid in finished:  # not retrained: the same checkpoints, byte for byte, none added
        assert checkpoint_fingerprints(tune_dir / after[tid]["relative_logdir"]) == prints[tid], tid
    df = read_cells(on_disk(storage / "fig10_k" / "results"))
    assert set(df["trial_id"]) == set(after)
    for tid, fp in prints.items():
        last = fp[max(fp)]
        assert set(df.loc[df["trial_id"] == tid, "model_id"]) == {last[0]} and last[1] == SWEEP_STEPS
    for tid in after:
        ckpts = checkpoint_fingerprints(tune_dir / after[tid]["relative_logdir"])
        assert ckpts[max(ckpts)][1] == SWEEP_STEPS  # unfinished trials completed too
    # the evaluation is complete: every model x every cell, exactly once
    assert df["model_id"].nunique() == 3 and len(df) == 3 * 9
    assert not df.duplicated(list(KEY)).any()
    # and holds what an uninterrupted run scores: the same models (ids are weight hashes), the same
    # n_correct in every cell
    from abacus_ray.config import ExperimentConfig

    spec = json.loads((storage / "fig10_k" / "sweep.json").read_text())  # the trials' configs
    configs = [ExperimentConfig.from_dict(t) for t in spec["trials"]]
    want = uninterrupted_scores(configs, SWEEP_CELLS, tmp_path / "uninterrupted")
    got = {(m, i, j): n
           for m, i, j, n in zip(df["model_id"], df["i"], df["j"], df["n_correct"], strict=True)}
    assert got == want, (sorted(set(df["model_id"])), sorted({m for m, _, _ in want}))
    # Tracking (the default, MLflow through Tune's callback): one run per trial, the killed session's
    # runs continued rather than duplicated, each with the full config, training metrics, eval means
    # and its checkpoint; read through MLflow's own API.
    import mlflow
    client = mlflow.tracking.MlflowClient(f"sqlite:///{storage / 'fig10_k' / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("fig10_k").experiment_id])
    assert len(runs) == 3 and {r.info.status for r in runs} == {"FINISHED"}
    for tid in after:
        [run] = [r for r in runs if r.data.tags["trial_name"].endswith(tid)]
        assert run.data.params["train.max_steps"] == str(SWEEP_STEPS) and "model.max_k" in run.data.params
        assert run.data.metrics["step"] == SWEEP_STEPS
        mine = df[(df["trial_id"] == tid) & (df["region"] == "id")]
        assert run.data.metrics["eval_id"] == pytest.approx(mine["accuracy"].mean())
        assert Path(run.data.tags["checkpoint"]).is_dir()
    print(f"\ndriver fault: killed the driver {t_kill:.1f}s in ({family} processes under it; Ray core gone, agents "
          f"killed by process group: {left_agents}), "
          f"finished {len(finished)} trial(s), unfinished {unfinished}; rerun {t_rerun:.1f}s")
