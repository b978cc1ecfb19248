"""Every sweep file expands (purely, no Ray) into valid trials whose swept values reach the results columns.

The Ray path of a sweep (Tune + Train + Ray Data) runs for real in `test_sweep_files_on_ray.py` and
`test_fig10_on_ray.py`; here the expansion itself is checked for all 17 figures in seconds.
"""

import json
from pathlib import Path

import pytest

from abacus_ray.api.sweeps import load_sweep
from abacus_ray.cli import main
from abacus_ray.config import ExperimentConfig
from abacus_ray.config.dicts import flatten
from abacus_ray.evaluation.grids import resolve_grid_names
from abacus_ray.evaluation.results import config_columns
from abacus_ray.sweep import swept_keys

SWEEPS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "sweeps").glob("*.py"))
FIGURES = ("fig3_embeddings", "fig4_depth_recurrence", "fig5_add_sub", "fig6_multiplication", "fig7_relative",
           "fig8_bitwise_or", "fig9_data_size", "fig10_k", "fig11_large_k", "fig15_recurrence_outputs",
           "fig16_no_mask", "fig18_effective_depth", "fig19_injection_throttle", "fig20_random_padding",
           "fig21_index_hints", "table1_sorting", "table2_sorting_arch")


def test_every_figure_has_a_sweep_file():
    assert set(FIGURES) <= set(SWEEPS)


@pytest.mark.parametrize("preset", ["tiny", "paper"])
@pytest.mark.parametrize("name", SWEEPS)
def test_sweep_expands_once_into_valid_distinct_trials(name, preset):
    sweep = load_sweep(name)
    trials = sweep.expand(preset)
    assert trials, name
    names = [t.name for t in trials]
    assert len(set(names)) == len(names) and all(n.startswith(f"{name}/") for n in names)
    for t in trials:
        assert isinstance(t.config, ExperimentConfig)
        resolve_grid_names(t.config.eval.grids)  # every grid of every trial exists
        assert ExperimentConfig.from_dict(t.config.to_dict()) == t.config  # what sweep.json records rebuilds it
    flat = [flatten(t.config.to_dict()) for t in trials]
    for t, f in zip(trials, flat, strict=True):
        assert t.params == {k: f[k] for k in t.params}  # Tune shows the resolved values themselves
    varying = {k for k in flat[0] if k != "name" and len({repr(f[k]) for f in flat}) > 1}
    assert set(trials[0].params) == varying
    columns = config_columns(trials[0].config)
    assert {k for k in varying if not k.startswith("eval.")} <= set(columns)  # swept values reach Parquet


@pytest.mark.parametrize("name", FIGURES)
def test_cpu_scale_trials_follow_the_step_count_alone(name):
    """A wall-clock cap makes the first steps' learning rate follow the machine's start-up time, and
    a clean rerun trains other weights (seen in 3 of 80 trials of two `make reproduce` runs)."""
    for t in load_sweep(name).expand("tiny"):
        assert t.config.train.budget_hours is None, t.name
        assert t.config.train.max_steps or t.config.train.max_samples, t.name


def test_expansion_names_trials_by_their_swept_overrides():
    trials = load_sweep("fig10_k").expand("tiny")
    assert [t.name for t in trials] == [f"fig10_k/max_k={k}" for k in (1, 12)]  # one seed: not swept
    assert [t.params for t in trials] == [{"model.max_k": k} for k in (1, 12)]
    assert all(t.config.eval.grids == ("cells:1-5x1-5", "diagonal:1-20") for t in trials)
    assert swept_keys([{"a": 1, "seed": 0}, {"a": 2, "seed": 0}]) == ["a"]


def test_figure_flags_and_overrides_apply_to_every_trial():
    sweep = load_sweep("fig4_depth_recurrence")
    trials = sweep.expand("tiny", axes={"model.positions": ["fire", "nope"]}, overrides={"train.lr": "0.002"},
                          grids=("cells:1-2x1-2",), seeds=2)
    assert len(trials) == 3 * 2 * 2
    assert {t.config.model.positions for t in trials} == {"fire", "nope"}
    assert {t.config.train.lr for t in trials} == {0.002}
    assert {t.config.eval.grids for t in trials} == {("cells:1-2x1-2",)}


def test_dry_run_prints_the_expansion_and_starts_nothing(capsys, no_ray, tmp_path):
    storage = tmp_path / "never"
    assert main(["sweep", "fig10_k", "--dry-run", "--storage", str(storage), "--set", "train.max_steps=7"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = load_sweep("fig10_k").expand("tiny", overrides={"train.max_steps": "7"})
    assert [t["name"] for t in out["trials"]] == [t.name for t in expected]
    assert [t["config"] for t in out["trials"]] == [t.config.to_dict() for t in expected]
    assert all(t["config"]["train"]["max_steps"] == 7 for t in out["trials"])
    assert not storage.exists()


def test_an_axis_on_the_command_line_crosses_or_replaces_the_sweeps_own(capsys, no_ray, tmp_path):
    """`--axis KEY=V1,V2` sweeps any config key without a sweep file: crossed with the sweep's own
    axes, or (a key it already sweeps) taking their place; each trial named by its values."""
    storage = tmp_path / "never"
    names = {}
    for extra in (["--axis", "train.lr=1e-3,3e-3"], ["--axis", "model.max_k=3,5,7"]):
        assert main(["sweep", "fig10_k", "--dry-run", "--storage", str(storage), *extra]) == 0
        names[extra[1]] = [(t["name"], t["config"]["train"]["lr"], t["config"]["model"]["max_k"])
                           for t in json.loads(capsys.readouterr().out)["trials"]]
    assert names["train.lr=1e-3,3e-3"] == [
        (f"fig10_k/max_k={k}_lr={lr}", float(lr), k) for k in (1, 12) for lr in ("1e-3", "3e-3")]
    assert [n for n, _, _ in names["model.max_k=3,5,7"]] == [f"fig10_k/max_k={k}" for k in (3, 5, 7)]
    assert not storage.exists()


def test_sweep_by_path_and_unknown_name(capsys, tmp_path, no_ray):
    path = Path(__file__).resolve().parents[1] / "sweeps" / "fig3_embeddings.py"
    assert main(["sweep", str(path), "--dry-run", "--max-trials", "1"]) == 0
    assert len(json.loads(capsys.readouterr().out)["trials"]) == 1
    assert main(["sweep", "fig99"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("abacus-ray sweep: error: NAME: no sweep named 'fig99'") and "fig10_k" in err


def test_every_sweep_script_runs_the_figure_the_package_ships():
    """sweeps/NAME.py is a thin script: the sweep it declares is the package's own figure, found by name."""
    from abacus_ray import figures

    assert set(figures.names()) == set(SWEEPS)
    for name in SWEEPS:
        by_path = load_sweep(str(Path(__file__).resolve().parents[1] / "sweeps" / f"{name}.py"))
        assert by_path is figures.figure(name) is load_sweep(name)
    assert figures.figure("fig99") is None
