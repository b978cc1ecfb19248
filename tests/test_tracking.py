"""MLflow tracking of a sweep, and trials that keep dying (Ray's memory monitor kills a worker with SIGKILL).

Without Ray: what a run keeps (the loop's metrics, not Tune's pid/timestamp/done), its artifacts
(`config.json`, the trial's cells as `cells.parquet`), runs a stopped sweep left RUNNING, and the line
that names failed trials. With Ray: a trial whose process is killed on every attempt fails after
Tune's retries, and a trial whose loss stops being finite is stopped by the loop without retries (a
rerun would diverge again), while the other trial finishes; both runs end FAILED.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from abacus_ray import storage
from abacus_ray.storage import on_disk
from abacus_ray.sweep_dir import SweepDir
from dashboards.sample import synthetic_results

SQUARE = [(i, j) for i in range(1, 4) for j in range(1, 4)]


def _client(root: Path):
    import mlflow

    from abacus_ray.cluster.tracking import store_uri

    return mlflow.tracking.MlflowClient(tracking_uri=store_uri(root))


def _experiment(root: Path, name: str) -> str:
    from abacus_ray.cluster.tracking import artifact_root

    root.mkdir(parents=True, exist_ok=True)
    return _client(root).create_experiment(name, artifact_location=artifact_root(root))


def test_only_the_loops_metrics_are_tracked():
    from abacus_ray.cluster.tracking import tracked

    result = {"step": 40, "loss": 1.5, "lr": 1e-3, "validation_12": 0.5, "pid": 4242, "timestamp": 1.7e9,
              "done": False, "training_iteration": 3, "time_this_iter_s": 0.2, "final": True, "world_size": 1}
    assert tracked(result) == {"step": 40, "loss": 1.5, "lr": 1e-3, "validation_12": 0.5}


@pytest.mark.slow  # over a second: out of the fast tier
def test_evaluation_logs_means_and_the_trials_cells_as_an_artifact(tmp_path):
    from abacus_ray.cluster.tracking import RUN_TAG, log_evaluation
    from abacus_ray.config import preset
    from abacus_ray.evaluation.results import read_cells
    from abacus_ray.evaluation.work import Source

    root = tmp_path / "fig10_k"
    exp = _experiment(root, "fig10_k")
    client = _client(root)
    runs = {name: client.create_run(exp, tags={RUN_TAG: name}).info.run_id for name in ("fig10_k/a", "fig10_k/b")}
    synthetic_results(root / "results", [(name, []) for name in runs], SQUARE, per_cell=10)
    finished = [(Source("/ckpt/a", run_id="fig10_k/a"), preset("tiny")), (Source("/ckpt/b", run_id="fig10_k/b"),
                                                                           preset("tiny"))]
    assert log_evaluation(root, "fig10_k", finished, storage.on_disk(root / "results")) == 2
    cells = read_cells(on_disk(root / "results"))
    for name, run_id in runs.items():
        run = client.get_run(run_id)
        mine = cells[cells["run_id"] == name]
        assert run.data.metrics["eval_id"] == pytest.approx(mine["accuracy"].mean())
        assert run.data.tags["checkpoint"] == f"/ckpt/{name[-1]}"
        assert [a.path for a in client.list_artifacts(run_id)] == ["cells.parquet"]
        import mlflow.artifacts  # here, not at collection: 1.4 s of every worker's start

        local = mlflow.artifacts.download_artifacts(  # from the run's own artifact location
            artifact_uri=f"{run.info.artifact_uri}/cells.parquet", dst_path=str(tmp_path / run_id))
        back = pq.read_table(local).to_pandas()
        assert len(back) == len(mine) == len(SQUARE) and set(back["run_id"]) == {name}
        assert sorted(back["n_correct"]) == sorted(mine["n_correct"])
    assert (root / "mlartifacts").is_dir()  # beside the store, not in the working directory


@pytest.mark.slow  # over a second: out of the fast tier
def test_runs_left_running_end_failed_or_killed(tmp_path):
    from abacus_ray.cluster.tracking import RUN_TAG, close_runs

    root = tmp_path / "s"
    exp = _experiment(root, "s")
    client = _client(root)
    ids = {name: client.create_run(exp, tags={RUN_TAG: name}).info.run_id for name in ("s/ok", "s/oom", "s/cut", "s/x")}
    client.set_terminated(ids["s/ok"], status="FINISHED")
    assert close_runs(root, "s", {"s/ok": "finished", "s/oom": "failed", "s/cut": "stopped"}) == 3
    status = {name: client.get_run(i).info.status for name, i in ids.items()}
    assert status == {"s/ok": "FINISHED", "s/oom": "FAILED", "s/cut": "KILLED", "s/x": "FAILED"}


@pytest.mark.slow  # an MLflow store: seconds
def test_a_resumed_trial_keeps_its_run_and_a_grown_one_gets_a_new_run(tmp_path):
    """A rerun of the same trial (a killed driver, its params logged whole, in part or not at all)
    continues its run; a trial whose config the grown sweep changed gets a new run tagged with the
    one it follows, since MLflow refuses to change a logged param."""
    from abacus_ray.cluster.tracking import GROWN_FROM_TAG, RUN_TAG, TrialRuns
    from abacus_ray.config import preset

    class Trial:  # what the callback reads of a Tune trial
        def __init__(self, name: str) -> None:
            self.config = {"run": name}

        def __str__(self) -> str:
            return self.config["run"]

    def start(steps: int, name: str = "t/a") -> dict[str, list]:
        callback = TrialRuns(tmp_path, "exp", {name: preset("tiny", {"train.max_steps": steps})})
        callback.setup()
        callback.log_trial_start(Trial(name))
        runs = _client(tmp_path).search_runs([_client(tmp_path).get_experiment_by_name("exp").experiment_id])
        return {r.info.run_id: r for r in runs if r.data.tags[RUN_TAG] == name}

    (first,) = start(20)
    assert list(start(20)) == [first]  # the same trial again: its run goes on
    (half,) = set(start(20, "t/b"))  # a run whose params a kill cut short: some of them logged
    client = _client(tmp_path)
    params = client.get_run(half).data.params
    client.delete_run(half)
    run = client.create_run(client.get_experiment_by_name("exp").experiment_id, tags={RUN_TAG: "t/b"})
    for key in sorted(params)[:10]:
        client.log_param(run.info.run_id, key, params[key])
    assert set(start(20, "t/b")) == {run.info.run_id}
    assert client.get_run(run.info.run_id).data.params == params  # the rest logged on resume
    grown = start(25)
    assert len(grown) == 2 and grown[first].data.params["train.max_steps"] == "20"
    (new,) = set(grown) - {first}
    assert grown[new].data.params["train.max_steps"] == "25" and grown[new].data.tags[GROWN_FROM_TAG] == first


def test_the_closing_line_names_each_failed_trial_and_why():
    from abacus_ray.cluster.driver import EVALUATION, failure_line

    line = failure_line("fig10_k", 4, {"fig10_k/max_k=6": "OutOfMemoryError: Task was killed",
                                       "fig10_k/max_k=3": "ActorDiedError: The actor died"},
                        {"fig10_k/max_k=6": "error", "fig10_k/max_k=3": "error"})
    assert "\n" not in line
    assert line.startswith("fig10_k: 2 of 4 trial(s) failed: fig10_k/max_k=3 (ActorDiedError: The actor died); "
                           "fig10_k/max_k=6 (OutOfMemoryError: Task was killed); the others finished.")
    assert "evaluation" not in line
    both = failure_line("f", 2, {EVALUATION: "OutOfMemoryError: x", "f/a": "RayActorError: y"},
                        {"f/a": "error"})
    assert "1 of 2 trial(s) failed: f/a (RayActorError: y)" in both and "evaluation stopped (OutOfMemoryError: x)" in both
    # a trial stops as diverged on a non-finite loss or gradient norm (training/loop.py); no rerun
    # retries it. Its status says so, not its reason's words
    assert failure_line("f", 2, {"f/b": "diverged at step 7"}, {"f/b": "diverged"}) == (
        "f: 1 of 2 trial(s) diverged (loss or gradient norm not finite; not scored): f/b (diverged at step 7); "
        "a lower train.lr or another config is needed")


def _check_statuses(root: Path, want: dict[str, str], scored: str) -> None:
    """The trial record, the timeline and eval-all agree with the closing line on each status."""
    from abacus_ray import storage
    from abacus_ray.api.evaluate_all import sweep_models
    from abacus_ray.trial_status import parse_include

    record = pq.read_table(root / SweepDir.TRIALS).to_pylist()
    assert {r["run"]: r["status"] for r in record} == want
    timeline = {r["run"]: r["status"] for r in pq.read_table(root / SweepDir.TIMELINE).to_pylist()}
    assert {k: v for k, v in want.items() if k in timeline} == timeline
    assert "diverged" in timeline.values()
    # what the sweep scored
    assert sweep_models(storage.resolve(root), parse_include(None)) == [on_disk(Path(scored))]
    more = sweep_models(storage.resolve(root), parse_include("stopped,diverged,error"))
    assert on_disk(Path(scored)) in more and all(storage.is_dir(m) for m in more)


class TrialKiller(threading.Thread):
    """SIGKILL, as Ray's memory monitor does, every process that runs one trial, on every attempt.

    A `function` trial runs in a Tune actor whose working directory is the trial's directory
    (`run_trial_<experiment>_<index>_<index>_<date>`); that is how its process is told from the other's.
    """

    def __init__(self, marker: str, timeout: float = 240.0):
        super().__init__(daemon=True)
        self.marker, self.timeout = marker, timeout
        self.killed: list[int] = []
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil

        from benchmarks.census import descendants

        deadline = time.monotonic() + self.timeout
        while not self.stop.is_set() and time.monotonic() < deadline:
            for p in descendants()[1:]:
                try:
                    if p.pid not in self.killed and self.marker in p.cwd():
                        p.send_signal(signal.SIGKILL)
                        self.killed.append(p.pid)
                except (psutil.Error, OSError):
                    pass
            time.sleep(0.05)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.cost(110)
def test_killed_and_diverged_trials_fail_alone_and_their_runs_end_failed(ray_local, tmp_path):
    from abacus_ray import storage
    from abacus_ray.api.sweeps import load_sweep
    from abacus_ray.cluster.driver import MAX_TRIAL_FAILURES, failure_line, run_sweep
    from abacus_ray.sweep import Trial

    trials = load_sweep("fig10_k").expand("tiny", overrides={
        "train.max_steps": 30, "cluster.trainer": "function", "train.report_every_s": 0.5})[:2]
    doomed, other = trials[0].name, trials[1].name  # fig10_k/max_k=1 and max_k=12
    # a third trial whose loss overflows within a few steps (lr 1e3): stopped by the loop, never retried;
    # under a TorchTrainer, so that the report reaches the driver through Ray Train too
    spoiled = Trial(trials[1].config.with_overrides({"name": "fig10_k/lr=1000", "train.lr": 1e3,
                                                     "cluster.trainer": "torch"}), {"lr": 1e3})
    killer = TrialKiller("_00000_0_")  # Tune's first trial: the first point, `doomed`
    killer.start()
    try:
        finished = run_sweep("fig10_k", "tiny", [*trials, spoiled], storage_root=storage.resolve(tmp_path),
                             grids={}, evaluate=False).finished
    finally:
        killer.stop.set()
        killer.join()
    assert [src.run_id for src, _ in finished] == [other]  # the other trial finished
    record = pq.read_table(tmp_path / "fig10_k" / SweepDir.TRIALS).to_pylist()
    failures = {r["run"]: r["reason"] for r in record if r["reason"] is not None}
    assert sorted(failures) == sorted([doomed, spoiled.name]) and "Error" in failures[doomed], failures
    assert re.fullmatch(r"diverged at step \d+", failures[spoiled.name]), failures
    assert len(killer.killed) == MAX_TRIAL_FAILURES + 1  # every attempt was killed: retried, then failed
    line = failure_line("fig10_k", 3, failures, {r["run"]: r["status"] for r in record})
    assert f"1 of 3 trial(s) diverged (loss or gradient norm not finite; not scored): {spoiled.name} (diverged at step" in line
    assert spoiled.name not in line.split("diverged (loss")[0]  # not among those a rerun retries
    want = {doomed: "error", other: "finished", spoiled.name: "diverged"}
    _check_statuses(tmp_path / "fig10_k", want, finished[0][0].checkpoint)

    client = _client(tmp_path / "fig10_k")
    runs = {r.data.tags["abacus_run"]: r for r in client.search_runs(
        [client.get_experiment_by_name("fig10_k").experiment_id])}
    assert {k: r.info.status for k, r in runs.items()} == {doomed: "FAILED", other: "FINISHED", spoiled.name: "FAILED"}
    done = runs[other]
    assert done.data.metrics["step"] == 30 and not {"pid", "timestamp", "done"} & set(done.data.metrics)
    assert "config.json" in [a.path for a in client.list_artifacts(done.info.run_id)]


@pytest.mark.slow  # over a second: out of the fast tier
def test_runs_left_running_are_ended_past_the_first_page(tmp_path, monkeypatch):
    """MLflow answers a search one page at a time (1,000 runs a page); pages of 2 here, so that
    five runs stand for a sweep of more than 1,000 trials."""
    import mlflow

    from abacus_ray.cluster.tracking import RUN_TAG, close_runs

    search = mlflow.tracking.MlflowClient.search_runs

    def small_pages(self, experiment_ids, filter_string="", run_view_type=1, max_results=1000,
                    order_by=None, page_token=None):
        return search(self, experiment_ids, filter_string, run_view_type, min(max_results, 2),
                      order_by, page_token)

    root = tmp_path / "s"
    exp = _experiment(root, "s")
    client = _client(root)
    ids = [client.create_run(exp, tags={RUN_TAG: f"s/{n}"}).info.run_id for n in range(5)]
    monkeypatch.setattr(mlflow.tracking.MlflowClient, "search_runs", small_pages)
    assert close_runs(root, "s", {f"s/{n}": "stopped" for n in range(5)}) == 5
    assert {client.get_run(i).info.status for i in ids} == {"KILLED"}
