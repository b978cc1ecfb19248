"""A sweep started by an earlier version resumes when what changed does not change what is trained,
and a sweep that did change is refused naming the field, old -> new, and how to proceed
(`abacus_ray/config/identity.py`, checked against `sweep.json` by the command line before Ray
starts and by the driver; no Ray started here)."""

from __future__ import annotations

import json

import pytest

from abacus_ray import storage
from abacus_ray.api.sweeps import expand, search_of
from abacus_ray.cli.sweep import main, parse
from abacus_ray.config.dicts import flatten, unflatten
from abacus_ray.figures import figure
from abacus_ray.sweep import single
from abacus_ray.sweep_dir import SweepDir


def _spec(*overrides: str) -> dict:
    """What the driver records for a one-trial tiny sweep (the current version)."""
    trials = single("t", "tiny", dict(o.split("=", 1) for o in overrides))
    return SweepDir.spec_of("tiny", [t.config for t in trials])


def _recorded(root, spec: dict, change: dict, drop: tuple[str, ...] = ()) -> None:
    """`sweep.json` as an older version wrote it: `change` (dotted key -> value) applied, `drop`
    missing."""
    trials = []
    for trial in spec["trials"]:
        flat = {**flatten(trial), **change}
        trials.append(unflatten({k: v for k, v in flat.items() if k not in drop}))
    record = {"preset": spec["preset"], "trials": trials}
    storage.write_text(root / "sweep.json", json.dumps(record))


def test_a_sweep_of_the_previous_version_resumes(tmp_path):
    """The previous version wrote `train.compile: false` (the default was false, now null) and knew
    no cluster.wait_warn_s: neither changes what is trained, and the stored record is left as it
    was."""
    root = storage.resolve(tmp_path / "fig")
    spec = _spec()
    assert flatten(spec["trials"][0])["train.compile"] is None
    _recorded(root, spec, {"train.compile": False, "train.report_every_s": 1.0},
              drop=("cluster.wait_warn_s",))
    before = storage.read_text(root / "sweep.json")
    SweepDir.of(root).check_same(spec)  # a rerun after the upgrade: accepted
    assert storage.read_text(root / "sweep.json") == before


def test_a_changed_sweep_is_refused_naming_the_field_and_the_way_on(tmp_path):
    root = storage.resolve(tmp_path / "fig")
    _recorded(root, _spec(), {"train.compile": False, "train.lr": 0.002})
    with pytest.raises(ValueError) as e:
        SweepDir.of(root).check_same(_spec())
    message = str(e.value)
    assert message.startswith(f"--storage: {root} holds a different sweep: trial t/base: "
                              "train.lr 0.002 -> 0.001; ")
    assert "rerun with --set train.lr=0.002" in message and "give another --storage" in message
    assert "\n" not in message


def test_a_key_an_old_record_lacks_is_read_as_its_old_default(tmp_path):
    """A record from before eval.hint_scoring meant the strict scoring; one from before
    train.worker_draws meant shared draws, the same as per-worker draws for one worker."""
    root = storage.resolve(tmp_path / "fig")
    _recorded(root, _spec(), {}, drop=("train.worker_draws",))
    SweepDir.of(root).check_same(_spec())
    _recorded(root, _spec(), {}, drop=("eval.hint_scoring",))
    with pytest.raises(ValueError, match='eval.hint_scoring "strict" -> "official"; to resume it, '
                                         "rerun with --set eval.hint_scoring=strict"):
        SweepDir.of(root).check_same(_spec())
    SweepDir.of(root).check_same(_spec("eval.hint_scoring=strict"))
    _recorded(root, _spec("cluster.workers=2"), {}, drop=("train.worker_draws",))
    with pytest.raises(ValueError, match='train.worker_draws "shared" -> "per_worker"'):
        SweepDir.of(root).check_same(_spec("cluster.workers=2"))


def test_other_trials_or_another_preset_are_named(tmp_path):
    root = storage.resolve(tmp_path / "fig")
    _recorded(root, _spec(), {"name": "other"})
    with pytest.raises(ValueError, match="1 of its trials not in this run \\(e.g. other\\); to "
                                         "resume it, rerun with the same sweep flags"):
        SweepDir.of(root).check_same(_spec())
    storage.write_text(root / "sweep.json", json.dumps({**_spec(), "preset": "paper"}))
    with pytest.raises(ValueError, match='preset "paper" -> "tiny"; to resume it, rerun with '
                                         "--preset paper"):
        SweepDir.of(root).check_same(_spec())


def _two(*overrides: str) -> dict:
    """A two-trial record: `t/base` and `u/base`, under `overrides`."""
    configs = [t.config for name in ("t", "u")
               for t in single(name, "tiny", dict(o.split("=", 1) for o in overrides))]
    return SweepDir.spec_of("tiny", configs)


def test_a_rerun_may_grow_a_sweep_by_trials_grids_or_steps(tmp_path):
    """Trials added (more seeds, more values), kept trials on more grids or more steps: accepted,
    named, recorded; each growth that trains starts the next generation of Tune runs. Fewer steps
    or grids, a trial left out or any other field: refused."""
    dirs = SweepDir.of(storage.resolve(tmp_path / "fig"))
    one = _spec("train.max_steps=20")
    assert not dirs.check_same(one) and SweepDir.generation(dirs.read_spec()) == 0
    grown = dirs.check_same(_two("train.max_steps=20"))
    assert grown.added == ("u/base",) and grown.trains and "1 new trial(s)" in grown.words()
    assert SweepDir.generation(dirs.read_spec()) == 1 and dirs.tune_run(1).name == "tune-1"
    grids = ["tiny-addition", "cells:6x6"]
    grown = dirs.check_same(_two("train.max_steps=20", f"eval.grids={','.join(grids)}"))
    assert grown.grids == ("t/base", "u/base") and not grown.trains
    assert SweepDir.generation(dirs.read_spec()) == 1  # scoring more trains nothing
    grown = dirs.check_same(_two("train.max_steps=40", f"eval.grids={','.join(grids)}"))
    assert grown.steps == ("t/base", "u/base") and SweepDir.generation(dirs.read_spec()) == 2
    assert not dirs.check_same(_two("train.max_steps=40", f"eval.grids={','.join(grids)}"))
    for shrunk, field in ((("train.max_steps=30", f"eval.grids={','.join(grids)}"), "train.max_steps"),
                          (("train.max_steps=40",), "eval.grids"),
                          (("train.max_steps=40", f"eval.grids={','.join(grids)}", "train.lr=0.002"),
                           "train.lr")):
        with pytest.raises(ValueError, match=f"trial t/base: {field} "):
            dirs.check_same(_two(*shrunk))
    with pytest.raises(ValueError, match="1 of its trials not in this run"):
        dirs.check_same(_spec("train.max_steps=40", f"eval.grids={','.join(grids)}"))


def test_trials_that_run_in_their_tune_trial_do_not_grow_by_training(tmp_path):
    """`cluster.trainer=function` keeps its checkpoints in its Tune trial, which a new Tune run
    cannot continue: such a sweep may be scored on more grids, not grown by trials or steps."""
    dirs = SweepDir.of(storage.resolve(tmp_path / "fig"))
    dirs.check_same(_spec("cluster.trainer=function"))
    with pytest.raises(ValueError, match="runs in its Tune trial"):
        dirs.check_same(_two("cluster.trainer=function"))
    assert dirs.check_same(_spec("cluster.trainer=function", "eval.grids=tiny-addition,cells:6x6")).grids


def test_the_command_line_refuses_another_sweep_before_ray_starts(tmp_path, capsys, monkeypatch):
    """A rerun with a changed `--set` into a sweep's directory is one line and exit 2 from the
    command line, before Ray starts; a field the cluster decides (an automatic `cluster.use_gpu`)
    is not compared before it is decided."""
    from abacus_ray.cluster import runtime

    def refuse(*args, **kwargs):  # a shared Ray may already run in this process
        raise AssertionError("the command started Ray")

    monkeypatch.setattr(runtime, "init", refuse)
    sweep = figure("fig5_add_sub")
    argv = ["--preset", "tiny", "--storage", str(tmp_path), "--tracking", "none"]
    options, _ = parse(sweep, argv)
    record = SweepDir.spec_of("tiny", [t.config for t in expand(sweep, options,
                                                                    search_of(sweep, options))])
    dirs = SweepDir(storage.resolve(tmp_path), sweep.name)
    storage.write_text(dirs.spec, json.dumps(record))
    assert main(sweep, [*argv, "--set", "train.lr=0.002"]) == 2
    # the command's own lines (a Ray already running in this process may log to stderr too)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("abacus-ray")]
    assert len(said) == 1 and said[0].startswith("abacus-ray sweep: error: --storage: ")
    assert "train.lr 0.001 -> 0.002" in said[0]
    automatic = {**record, "trials": [{**t, "cluster": {**t["cluster"], "use_gpu": None}}
                                      for t in record["trials"]]}
    dirs.check_same(automatic, write=False)  # undecided: accepted until the driver decides it


def test_a_sweep_grown_to_more_seeds_keeps_its_trials_names(tmp_path):
    """At one seed a trial's name carries no seed; at two, `_seed=0` and `_seed=1`: the seed-0
    trials are the recorded ones and keep their recorded names (their Train runs, their rows)."""
    sweep = figure("fig10_k")
    dirs = SweepDir.of(storage.resolve(tmp_path / "fig10_k"))
    dirs.check_same(SweepDir.spec_of("tiny", [t.config for t in sweep.expand("tiny")]))
    two = SweepDir.spec_of("tiny", [t.config for t in sweep.expand("tiny", seeds=2)])
    renamed = dirs.recorded_names(two)
    assert renamed == {"fig10_k/max_k=1_seed=0": "fig10_k/max_k=1",
                       "fig10_k/max_k=12_seed=0": "fig10_k/max_k=12"}
