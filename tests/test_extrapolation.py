"""Issue 20's pieces: the balanced Abacus offset draw, the search (pick, best point, confirmation) and the
search sweep file run end to end on Ray with a handful of trials (the validation itself: test_training_loop.py)."""

import json

import numpy as np
import pytest
import torch

from abacus_ray import storage
from abacus_ray.api.sweeps import load_sweep
from abacus_ray.cli import main
from abacus_ray.config import preset
from abacus_ray.evaluation.results import read_cells
from abacus_ray.model.positions import OffsetDraw, balanced_offset_weights
from abacus_ray.seeds import micro_batch_generator
from abacus_ray.storage import on_disk
from abacus_ray.sweep import Search, best_point
from dashboards.site import sweep_page_name


def _coverage(weights, longest):
    """How often each Abacus row 1..K+D is trained per draw, digit d of a run reached w.p. (D-d+1)/D."""
    reach = (longest - np.arange(longest)) / longest
    cover = np.zeros(len(weights) + longest - 1)
    for k, w in enumerate(weights):
        cover[k:k + longest] += w * reach
    return cover


@pytest.mark.parametrize(("max_k", "longest"), [(24, 6), (180, 21)])
def test_balanced_draw_trains_the_top_rows_far_more_often_than_uniform(max_k, longest):
    balanced = np.array(balanced_offset_weights(max_k, longest))
    uniform = np.full(max_k + 1, 1 / (max_k + 1))
    assert balanced.min() >= 0 and balanced.sum() == pytest.approx(1.0)
    cb, cu = _coverage(balanced, longest), _coverage(uniform, longest)
    assert cb.min() / cb.max() > 2.5 * (cu.min() / cu.max())  # the least-trained row gains on the most-trained
    top = slice(max_k + 1, None)  # rows only the largest offsets reach
    assert cb[top].sum() > 2 * cu[top].sum()
    assert balanced[-1] > 4 * uniform[-1]  # weighted toward the largest offset


@pytest.mark.slow  # over a second: out of the fast tier
def test_offset_draw_follows_the_config():
    uniform = OffsetDraw.of(preset("tiny", ["model.max_k=24"]))
    assert uniform.probs is None  # the paper's draw, bit for bit the old one
    gen = micro_batch_generator(0, 7)
    assert uniform.draw(gen) == int(torch.randint(0, 25, (), generator=micro_batch_generator(0, 7)).item())
    balanced = OffsetDraw.of(preset("tiny", ["model.max_k=24", "model.k_draw=balanced"]))
    draws = np.bincount([balanced.draw(micro_batch_generator(0, i)) for i in range(20000)], minlength=25) / 20000
    assert np.abs(draws - balanced.probs.numpy()).max() < 0.01
    assert OffsetDraw.of(preset("tiny", ["model.positions=fire"])) is None
    with pytest.raises(ValueError, match="model.k_draw"):
        preset("tiny", ["model.k_draw=top"])


def test_search_picks_its_first_points_then_a_seeded_sample():
    sweep = load_sweep("extrapolation_10x")
    pool = sweep.expand("tiny")
    assert len(pool) == 2 * 3 * 2 * 2
    search = sweep.search_for("tiny")
    picked = search.pick(pool)
    assert len(picked) == search.samples and len({t.name for t in picked}) == search.samples
    first = picked[0].config
    assert (first.model.max_k, first.model.k_draw, first.model.layers, first.train.max_steps) == (20, "uniform", 2, 6000)
    assert [t.name for t in search.pick(pool)] == [t.name for t in picked]  # the same command, the same points
    other = Search(samples=search.samples, grace_steps=1, seed=1, first=search.first).pick(pool)
    assert [t.name for t in other] != [t.name for t in picked]
    with pytest.raises(ValueError, match="search.first"):
        Search(samples=2, grace_steps=1, first=({"model.max_k": 99},)).pick(pool)
    torch_trials = sweep.expand("tiny", overrides={"cluster.trainer": "torch"})
    with pytest.raises(ValueError, match="cluster.trainer"):  # a stopped TorchTrainer would leak its workers
        search.pick(torch_trials)
    paper = sweep.expand("paper")
    assert max(t.config.model.max_k for t in paper) >= 180
    assert {t.config.model.k_draw for t in paper} == {"uniform", "balanced"}


def test_confirmation_retrains_the_best_point_per_draw_and_seed():
    rows = [{"status": "stopped", "last": 0.9, "params": json.dumps({"model.max_k": 10})},
            {"status": "finished", "last": 0.4, "params": json.dumps({"model.max_k": 20, "model.k_draw": "uniform"})},
            {"status": "finished", "last": 0.6, "params": json.dumps({"model.max_k": 30, "model.k_draw": "balanced",
                                                                      "model.layers": 1, "model.recurrences": 2})}]
    best = best_point(rows)
    assert best["model.max_k"] == 30  # the stopped trial's higher validation does not count
    confirm = load_sweep("extrapolation_10x").confirmation("tiny", best).expand("tiny")
    assert len(confirm) == 2 * 3
    assert {(t.config.model.k_draw, t.config.seed) for t in confirm} == {(d, s) for d in ("uniform", "balanced")
                                                                         for s in range(3)}
    assert {(t.config.model.max_k, t.config.model.layers, t.config.model.recurrences) for t in confirm} == {(30, 1, 2)}
    assert all(t.name.startswith("extrapolation_10x_confirm/") for t in confirm)
    with pytest.raises(ValueError, match="no trial"):
        best_point(rows[:1])


def test_set_pins_a_swept_axis():
    trials = load_sweep("fig10_k").expand("tiny", overrides={"model.max_k": "7"})
    assert [t.config.model.max_k for t in trials] == [7]


def finished_runs(search) -> set[str]:
    return set(search.loc[search["status"] == "finished", "run"])


@pytest.mark.ray
@pytest.mark.cost(40)
def test_search_sweep_runs_end_to_end_with_asha(tmp_path, ray_local, capsys):
    """The sweep file as a user runs it, 4 points of 60 steps: Tune's ASHA over the validation, search.parquet,
    grid evaluation of the trials that ran their budget, the dashboard's search view, and --confirm's
    expansion from that search."""
    flags = ["--storage", str(tmp_path), "--samples", "4", "--grace-steps", "20", "--set", "train.max_steps=60",
             "--set", "eval.validation_every=20", "--set", "eval.validation_lengths=2,6", "--set", "eval.validation_per_cell=10",
             "--set", "eval.per_cell=10", "--grid", "diagonal:1-8",
             "--tracking", "none"]
    assert main(["sweep", "extrapolation_10x", *flags]) == 0
    root = tmp_path / "extrapolation_10x"
    search = storage.read_parquet(on_disk(root / "search.parquet")).to_pandas()
    assert search["run"].nunique() == 4 and set(search["status"]) <= {"finished", "stopped"}
    steps = search.groupby("run")["step"].apply(list)
    assert all(len(v) == len(set(v)) and 20 in v for v in steps)  # each validation once, at its step; the first rung
    assert all([s for s in v if s > 0] == [20, 40, 60] for v in steps[list(finished_runs(search))])  # 0: untrained
    assert search["metric"].notna().all() and search["metric"].between(0, 1).all()
    finished = finished_runs(search)
    cells = read_cells(on_disk(root / "results"))
    assert set(cells["run_id"]) == finished and len(cells) == 8 * len(finished)
    assert "stopped early by ASHA" in capsys.readouterr().err
    record = storage.read_parquet(on_disk(root / "trials.parquet")).to_pandas().set_index("run")["status"]
    assert record.to_dict() == search.groupby("run")["status"].first().to_dict()  # one status
    page = (root / "dashboard" / sweep_page_name("extrapolation_10x")).read_text()
    assert "4 configurations tried" in page and page.count("layers=") >= 4  # the search view and its table
    assert main(["sweep", "extrapolation_10x", *flags, "--confirm", "--dry-run"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [t["config"]["model"]["k_draw"] for t in out["trials"]] == ["uniform"] * 3 + ["balanced"] * 3
