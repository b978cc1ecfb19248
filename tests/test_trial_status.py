"""One status per trial (abacus_ray/trial_status.py), read alike by the sweep's closing line, the
search table (and so `--confirm`), the timeline and the trial record `eval-all` reads. Tune's own
`Result` objects are built here from the reports a trial leaves; no Ray is started."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import pandas as pd
import pytest

from abacus_ray import storage, trial_status
from abacus_ray.config import preset
from abacus_ray.sweep import best_point
from abacus_ray.trial_status import DIVERGED, ERROR, FINISHED, STOPPED

if TYPE_CHECKING:
    from ray.tune import Result


def test_each_ending_has_its_status():
    assert trial_status.status({"final": True, "step": 30}, errored=False) == FINISHED
    assert trial_status.status({"final": False, "step": 10}, errored=False) == STOPPED
    assert trial_status.status(None, errored=False) == STOPPED  # never reported: interrupted
    # a diverged run's final report is `final` too: it is diverged, never finished
    assert trial_status.status({"final": True, "diverged_at_step": 7}, errored=False) == DIVERGED
    nan = float("nan")  # a column of a report history, absent from this report
    assert trial_status.status({"final": True, "diverged_at_step": nan}, errored=False) == FINISHED
    assert trial_status.status({"final": True}, errored=True) == ERROR
    assert trial_status.status({}, errored=True) == ERROR


def test_include_takes_a_comma_list_of_statuses():
    assert trial_status.parse_include(None) == {FINISHED}
    assert trial_status.parse_include("diverged, stopped") == {FINISHED, DIVERGED, STOPPED}
    for bad in ("", " , ", "all", "finished,oops"):
        with pytest.raises(ValueError, match=r"^--include: .* is not a trial status; give a comma "
                                             r"list of stopped, diverged, error$"):
            trial_status.parse_include(bad)


def _result(root, run: str, validation: float, *, error=None, **last) -> Result:
    """A trial's Tune result: two validation reports, the last with `last` in it."""
    from ray.tune import Result  # here, not at collection: a second of every worker's start

    trial_id = run[-1]
    checkpoint = root / "train" / f"train-{trial_id}" / "step-000000010"
    base = {"config": {"run": run}, "trial_id": trial_id, "node_id": "n1", "pid": 1,
            "started_at": 1.0, "reported_at": 2.0, "checkpoint_path": str(checkpoint)}
    reports = [{**base, "step": 5, "validation": 0.1, "loss": 1.0, "final": False},
               {**base, "step": 10, "validation": validation, "loss": 0.5, **last}]
    return Result(metrics=reports[-1], checkpoint=None, error=error, path=str(root / "tune" / run),
                  metrics_dataframe=pd.DataFrame(reports))


@pytest.fixture
def grid(tmp_path):
    """A search's four endings; the diverged trial has the best validation, the finished one next."""
    root = tmp_path / "s"
    return root, [_result(root, "s/a", 0.6, final=True),
                  _result(root, "s/b", 0.3, final=False),
                  _result(root, "s/c", 0.9, final=True, diverged_at_step=12),
                  _result(root, "s/d", 0.8, error=RuntimeError("worker died\nmore"), final=False)]


def test_every_reader_sees_the_same_status_and_confirm_picks_a_finished_trial(grid):
    from abacus_ray.cluster.driver import search_line
    from abacus_ray.cluster.outcome import Outcome, outcomes, timeline_rows
    from abacus_ray.cluster.search import search_rows

    root, results = grid
    runs = ["s/a", "s/b", "s/c", "s/d"]
    want = dict(zip(runs, [FINISHED, STOPPED, DIVERGED, ERROR], strict=True))
    trials = [SimpleNamespace(name=r, params={"x": r[-1]}) for r in runs]
    read = outcomes(results, storage.resolve(root), history=True)  # Tune's grid, read once
    rows = search_rows(read, trials, "validation")
    assert {r["run"]: r["status"] for r in rows} == want
    assert best_point(rows) == {"x": "a"}  # --confirm: never the diverged (c) or errored (d) trial
    timeline = timeline_rows(read, {r: preset("tiny") for r in runs})
    assert {r["run"]: r["status"] for r in timeline} == want

    outcome = Outcome(read, {r: preset("tiny") for r in runs}, storage.resolve(root))
    assert outcome.statuses == want and list(outcome.finished) == ["s/a"]
    assert outcome.reasons == {"s/c": "diverged at step 12", "s/d": "RuntimeError: worker died"}
    assert {r["run"]: r["checkpoint"] for r in outcome.record} == {
        r: f"train/train-{r[-1]}/step-000000010" for r in runs}
    line = search_line("s", 4, outcome, root / "search.parquet")
    assert "1 ran their budget, 1 stopped early by ASHA, 1 diverged, 1 failed" in line


def test_the_trial_record_lists_what_a_sweep_scored(grid):
    from abacus_ray.cluster.driver import write_trial_record
    from abacus_ray.cluster.outcome import Outcome, outcomes

    root, results = grid
    loc = storage.resolve(root)
    configs = {r.config["run"]: preset("tiny") for r in results}
    written = write_trial_record(loc, Outcome(outcomes(results, loc), configs, loc))
    record = storage.read_parquet(written)
    scored = trial_status.checkpoints_to_score(record, frozenset({FINISHED}), "t")
    assert scored == ["train/train-a/step-000000010"]
    include = trial_status.parse_include("diverged,error")
    more = trial_status.checkpoints_to_score(record, include, "t")
    assert more == [f"train/train-{x}/step-000000010" for x in "acd"]


@pytest.mark.parametrize("path", ["/etc", "../other/train/x", "train/../../x", "s3://bucket/x"])
def test_a_record_naming_a_place_outside_its_sweep_is_refused(path):
    record = trial_status.record_table([{"run": "s/a", "status": FINISHED, "checkpoint": path}])
    with pytest.raises(ValueError, match=r"^where: checkpoint .* is not inside the sweep's "
                                         r"directory$"):
        trial_status.checkpoints_to_score(record, frozenset({FINISHED}), "where")
