"""Every command that reads results takes the same places (abacus_ray/evaluation/places.py): a results
directory, a sweep root holding `results/`, or a storage root holding several sweeps; `eval-all` pairs each
sweep's checkpoints with its own `results/`. Local directories here; the S3 form is in test_storage.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from abacus_ray import storage
from abacus_ray.cli import main
from abacus_ray.evaluation.locate import eval_targets, results_dirs
from abacus_ray.storage import on_disk
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


@pytest.mark.slow  # over a second: out of the fast tier
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
    assert [d.as_path() for d in results_dirs(storage.resolve(tmp_path))] == [a / "results",
                                                                            b / "results"]
    assert [d.as_path() for d in results_dirs(storage.resolve(a))] == [a / "results"]
    assert [d.as_path() for d in results_dirs(storage.resolve(a / "results"))] == [a / "results"]


def _places(target: Path) -> list[tuple[Path, Path]]:
    return [(p.models.as_path(), p.results.as_path())
            for p in eval_targets(storage.resolve(target))]


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
        eval_targets(storage.resolve(tmp_path / "nowhere"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match=r"^RESULTS: .*file: is not a directory"):
        results_dirs(storage.resolve(tmp_path / "file"))


# --- eval-all: what it scores, and where it looks --------------------------------------------

def _checkpoint(path: Path, seed: int = 0) -> Path:
    """A tiny checkpoint at `path` (a `step-*` directory); `seed` gives other weights."""
    import torch

    from abacus_ray.config import preset
    from abacus_ray.model.checkpoint import save_checkpoint
    from abacus_ray.model.transformer import ArithmeticTransformer

    cfg = preset("tiny", ["model.hidden=16", "model.intermediate=32", "model.heads=2",
                          "model.layers=1"])
    torch.manual_seed(seed)
    save_checkpoint(on_disk(path), ArithmeticTransformer.for_experiment(cfg), cfg,
                    {"step": 1, "samples": 64, "device_hours": 0.0, "micro_index": 1, "tokens": 100,
                     "optimizer": {"state": {}, "param_groups": []}})
    return path


def _eval_all_models(place: Path, *flags: str, base: Path | None = None) -> list[list[str]]:
    """The checkpoints `eval-all PLACE FLAGS` would score, per place, as paths relative to `base`
    (default: `place`)."""
    from abacus_ray import storage
    from abacus_ray.api.evaluate_all import targets_of

    given = {"out": None, "include": None}
    for flag, value in zip(flags[::2], flags[1::2], strict=True):
        given[flag.lstrip("-")] = value
    found = targets_of(storage.resolve(place), str(place), given["out"], given["include"])
    return [[str(Path(m).relative_to(base or place)) for m in models] for models, _ in found]


def test_eval_all_never_looks_above_the_place_it_was_given(tmp_path, capsys, no_ray):
    evals = tmp_path / "evals"
    _checkpoint(evals / "elsewhere" / "step-000000001")  # beside the results directory, not in it
    synthetic_results(evals / "a", [("x/y", [])], SQUARE, per_cell=20)
    assert _places(evals / "a") == [(evals / "a", evals / "a")]
    assert main(["eval-all", str(evals / "a")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"abacus-ray eval-all: error: RESULTS: no checkpoints to score under {evals / 'a'}")


def test_eval_all_scores_what_the_sweep_scored(tmp_path, capsys, no_ray):
    from abacus_ray import storage, trial_status
    from abacus_ray.evaluation.locate import EvalTarget
    from abacus_ray.sweep_dir import SweepDir

    sweep = write_sweep(tmp_path, "s")
    for t in "abcd":
        _checkpoint(sweep / "train" / f"train-{t}" / "step-000000001")
    assert main(["eval-all", str(sweep)]) == 2  # a sweep that never wrote its trial record
    assert capsys.readouterr().err.strip() == (
        f"abacus-ray eval-all: error: {sweep / 'trials.parquet'}: no trial record: a sweep writes "
        "it when its trials end; rerun the sweep's command to finish it, then eval-all")
    # a finished, b stopped, c diverged, d error
    statuses = dict(zip("abcd", trial_status.STATUSES, strict=True))
    storage.write_parquet(storage.on_disk(sweep / SweepDir.TRIALS), trial_status.record_table(
        {"run": f"s/{t}", "status": st, "checkpoint": f"train/train-{t}/step-000000001"}
        for t, st in statuses.items()))
    assert _eval_all_models(sweep) == [["train/train-a/step-000000001"]]
    # a results directory: its own sweep's
    assert _eval_all_models(sweep / "results", base=sweep) == [["train/train-a/step-000000001"]]
    assert eval_targets(storage.resolve(sweep / "results")) == [
        EvalTarget(storage.resolve(sweep), storage.resolve(sweep / "results"), sweep=True)]
    assert _eval_all_models(sweep, "--include", "diverged,error") == [
        [f"train/train-{t}/step-000000001" for t in "acd"]]
    assert _eval_all_models(tmp_path) == [["s/train/train-a/step-000000001"]]  # a storage root
    # one sweep of the root without its record, another with a damaged one: each skipped in a line
    broken = write_sweep(tmp_path, "t")
    _checkpoint(broken / "train" / "train-a" / "step-000000001")
    damaged = write_sweep(tmp_path, "u")
    (damaged / SweepDir.TRIALS).write_text("not parquet")
    capsys.readouterr()
    assert _eval_all_models(tmp_path) == [["s/train/train-a/step-000000001"]]
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 2 and said[0].startswith(f"eval-all: skipped {broken}: ")
    assert "no trial record" in said[0] and said[1].startswith(f"eval-all: skipped {damaged}: ")


def test_eval_all_names_results_not_out_when_no_out_was_given(tmp_path, capsys, no_ray):
    _checkpoint(tmp_path / "runs" / "a" / "step-000000001")
    (tmp_path / "runs" / "results").write_text("not a directory")
    assert main(["eval-all", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"abacus-ray eval-all: error: RESULTS: {tmp_path / 'runs' / 'results'}"), err


def test_eval_all_scores_two_copies_of_one_run_once_and_ends_a_link_loop(tmp_path, capsys):
    import shutil

    from abacus_ray.api.evaluate_all import checked_models, find_models

    runs = tmp_path / "runs"
    _checkpoint(runs / "a" / "step-000000001")
    shutil.copytree(runs / "a", runs / "b")
    _checkpoint(runs / "c" / "step-000000001", seed=1)
    models = find_models(storage.resolve(runs))
    assert models == [on_disk(runs / r / "step-000000001") for r in "abc"]
    assert checked_models(models, runs / "results") == [on_disk(runs / r / "step-000000001")
                                                        for r in "ac"]
    assert "1 checkpoint(s) for" in capsys.readouterr().err
    (runs / "loop").mkdir()
    for name in ("up", "up2"):  # two links back up: a recursive listing would branch at every level
        (runs / "loop" / name).symlink_to(runs)
    assert find_models(storage.resolve(runs)) == models


def _rewrite_parts(results: Path, **columns) -> None:
    """Every part of `results` with the given columns set to one value (a hostile, edited part)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for part in results.glob("part-*.parquet"):
        t = pq.read_table(part)
        for name, value in columns.items():
            col = t.column(name)
            column = pa.array([value] * len(col), col.type)
            t = t.set_column(t.schema.get_field_index(name), name, column)
        pq.write_table(t, part)


def test_summary_escapes_a_hostile_run_name_and_refuses_an_accuracy_above_one(tmp_path, capsys):
    results = tmp_path / "results"
    synthetic_results(results, [("s/ok", [])], SQUARE, per_cell=20)
    _rewrite_parts(results, run_id="s/\x1b[2J\x1b]0;owned\x07\u202eevil\r")
    assert main(["summary", str(results), "--label", "run_id"]) == 0
    out = capsys.readouterr().out
    assert r"s/\x1b[2J\x1b]0;owned\x07\u202eevil\r" in out
    assert not any(c in out for c in "\x1b\x07\u202e\r")
    _rewrite_parts(results, accuracy=5.0)  # n_correct / n cannot be 5: it would print as 500 %
    assert main(["summary", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"abacus-ray summary: error: {results}: part-") and err.endswith(
        "holds an accuracy of 5, not a fraction in [0, 1]; not an abacus-ray results file"), err


def test_an_evaluated_block_whose_every_cell_another_writer_wrote_is_dropped_whole(tmp_path):
    """Two writers (or two copies of one model) on one results directory: a block of cells already
    present is written as nothing, not a pyarrow `take` of an untyped empty list."""
    from abacus_ray.cluster.grid_eval import _fresh
    from abacus_ray.evaluation.results import KeyIndex, read_cells_table

    synthetic_results(tmp_path / "r", [("s/a", [])], SQUARE, per_cell=20)
    block = read_cells_table(on_disk(tmp_path / "r"))
    assert _fresh(block, KeyIndex(on_disk(tmp_path / "r"))).num_rows == 0
    (tmp_path / "other").mkdir()
    assert _fresh(block, KeyIndex(on_disk(tmp_path / "other"))).num_rows == block.num_rows


@pytest.mark.parametrize("kind", ["garbage", "sparse", "fifo", "foreign", "outside"])
def test_eval_all_refuses_a_bad_trial_record_naming_it(kind, tmp_path, capsys, no_ray):
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from abacus_ray import trial_status

    sweep = write_sweep(tmp_path, "s")
    record = sweep / "trials.parquet"
    if kind == "garbage":
        record.write_bytes(b"PAR1 not a parquet file")
    elif kind == "sparse":  # 4 GB that takes no disk: its size is refused before it is read
        with open(record, "wb") as f:
            f.truncate(4 << 30)
    elif kind == "fifo":  # reading it would block forever
        os.mkfifo(record)
    elif kind == "foreign":
        pq.write_table(pa.table({"x": [1]}), record)
    else:
        row = {"run": "s/a", "status": "finished", "checkpoint": "../../elsewhere/step-000000001"}
        pq.write_table(trial_status.record_table([row]), record)
    assert main(["eval-all", str(sweep)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"abacus-ray eval-all: error: {record}: ") and "\n" not in err, err


HOSTILE_RECORDS = {
    "a JSON list": "[1, 2]",
    "nested past the stack": "[" * 100_000,
    "a NaN": '{"preset": "tiny", "trials": [], "x": NaN}',
    "trials of the wrong type": '{"preset": "tiny", "trials": "all"}',
}


@pytest.mark.parametrize("content", HOSTILE_RECORDS.values(), ids=list(HOSTILE_RECORDS))
def test_a_damaged_sweep_record_is_one_line_where_it_is_read(tmp_path, capsys, content):
    from abacus_ray.sweep_dir import SweepDir

    sweep = write_sweep(tmp_path, "fig10_k")
    (sweep / "sweep.json").write_text(content)
    for argv in (["summary", str(sweep)], ["dashboard", str(sweep), "--out", str(tmp_path / "d")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"abacus-ray {argv[0]}: error: {sweep}/sweep.json")
    with pytest.raises(ValueError, match="^" + str(sweep / "sweep.json")):  # what a resume reads
        SweepDir.of(storage.on_disk(sweep)).check_same({"preset": "tiny", "trials": []})


def test_a_storage_root_serves_every_sweep_but_a_damaged_one(tmp_path, capsys):
    write_sweep(tmp_path, "fig10_k")
    (write_sweep(tmp_path, "fig11_large_k") / "sweep.json").write_text("[1, 2]")
    damaged = write_sweep(tmp_path, "fig3_embeddings") / "results"
    next(damaged.glob("part-*.parquet")).write_bytes(b"garbage")
    assert main(["summary", str(tmp_path), "--label", "run_id"]) == 0
    out, err = capsys.readouterr()
    assert "fig10_k/max_k=6_seed=0" in out and "fig11_large_k/" not in out
    said = sorted(err.strip().splitlines())
    assert said[0].startswith(f"summary: skipped {tmp_path / 'fig11_large_k' / 'results'}: ")
    assert said[1].startswith(f"summary: skipped {damaged}: ")
    assert len(said) == 2
    assert main(["dashboard", str(tmp_path), "--out", str(tmp_path / "site")]) == 0
    assert len(capsys.readouterr().err.strip().splitlines()) == 2
    assert (tmp_path / "site" / "index.html").is_file()
