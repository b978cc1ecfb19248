"""Every command that reads results takes the same places (abacus_ray/evaluation/places.py): a results
directory, a sweep root holding `results/`, or a storage root holding several sweeps; `eval-all` pairs each
sweep's checkpoints with its own `results/`. Local directories here; the S3 form is in test_storage.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from abacus_ray.cli import main
from abacus_ray.evaluation.places import evaluation_places, results_dirs
from dashboards.sample import synthetic_results

SQUARE = [(i, j) for i in range(1, 4) for j in range(1, 4)]


def write_sweep(storage_root: Path, sweep: str, seeds=(0,)) -> Path:
    """A sweep root as a sweep leaves it: sweep.json, train/ and results/ (made-up rows, no training)."""
    root = storage_root / sweep
    (root / "train").mkdir(parents=True)
    (root / "sweep.json").write_text(json.dumps({"preset": "tiny", "trials": []}))
    models = [(f"{sweep}/max_k=6_seed={s}", ["model.max_k=6", f"seed={s}"]) for s in seeds]
    synthetic_results(root / "results", models, SQUARE, per_cell=20)
    return root


def _summary_runs(capsys, place: Path) -> set[str]:
    """The run names `abacus-ray summary PLACE --label name` prints, one per model."""
    assert main(["summary", str(place), "--label", "run_id"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()[1:]
    return {word for line in lines for word in line.split() if "/max_k=" in word}


def test_summary_takes_a_results_directory_a_sweep_root_and_a_storage_root(tmp_path, capsys):
    a = write_sweep(tmp_path, "fig10_k", seeds=(0, 1))
    write_sweep(tmp_path, "fig11_large_k")
    both = {"fig10_k/max_k=6_seed=0", "fig10_k/max_k=6_seed=1", "fig11_large_k/max_k=6_seed=0"}
    assert _summary_runs(capsys, a / "results") == {"fig10_k/max_k=6_seed=0", "fig10_k/max_k=6_seed=1"}
    assert _summary_runs(capsys, a) == {"fig10_k/max_k=6_seed=0", "fig10_k/max_k=6_seed=1"}  # one folder down
    assert _summary_runs(capsys, tmp_path) == both  # every sweep of the storage root


def test_summary_refuses_a_place_without_results_naming_it(tmp_path, capsys):
    (tmp_path / "fig10_k" / "train").mkdir(parents=True)
    assert main(["summary", str(tmp_path / "fig10_k")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{tmp_path / 'fig10_k'}: holds no abacus-ray results" in err and "results/" in err


def test_dashboard_takes_a_sweep_root_and_a_storage_root(tmp_path, capsys):
    write_sweep(tmp_path / "runs", "fig10_k")
    write_sweep(tmp_path / "runs", "fig11_large_k")
    assert main(["dashboard", str(tmp_path / "runs" / "fig10_k"), "--out", str(tmp_path / "one")]) == 0
    assert main(["dashboard", str(tmp_path / "runs"), "--out", str(tmp_path / "all")]) == 0
    capsys.readouterr()
    assert {p.name for p in (tmp_path / "one").glob("sweep-*.html")} == {"sweep-fig10_k.html"}
    assert {p.name for p in (tmp_path / "all").glob("sweep-*.html")} == {"sweep-fig10_k.html",
                                                                         "sweep-fig11_large_k.html"}


def test_the_readers_share_one_reading_of_a_place(tmp_path):
    a = write_sweep(tmp_path, "a")
    b = write_sweep(tmp_path, "b")
    assert [d.as_path() for d in results_dirs(tmp_path)] == [a / "results", b / "results"]
    assert [d.as_path() for d in results_dirs(a)] == [a / "results"]
    assert [d.as_path() for d in results_dirs(a / "results")] == [a / "results"]


def _places(target: Path) -> list[tuple[Path, Path]]:
    return [(p.models.as_path(), p.results.as_path()) for p in evaluation_places(target)]


def test_eval_all_scores_each_sweep_into_its_own_results(tmp_path):
    a = write_sweep(tmp_path, "a")
    b = write_sweep(tmp_path, "b")
    (tmp_path / "b" / "results").rename(tmp_path / "b" / "old")  # a sweep not evaluated yet: train/ only
    assert _places(tmp_path) == [(a, a / "results"), (b, b / "results")]  # a storage root: per sweep
    assert _places(a) == [(a, a / "results")]  # a sweep root
    assert _places(a / "results") == [(a, a / "results")]  # a results directory: its sweep's models
    runs = tmp_path / "runs"  # `abacus-ray train --out` directories side by side
    (runs / "tiny-1" / "step-000000001").mkdir(parents=True)
    assert _places(runs) == [(runs, runs / "results")]


def test_a_missing_place_is_refused_naming_results(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^RESULTS: .*nowhere: no such results directory"):
        evaluation_places(tmp_path / "nowhere")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match=r"^RESULTS: .*file: is not a directory"):
        results_dirs(tmp_path / "file")
