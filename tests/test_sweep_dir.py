"""A sweep's directory is named in one place (abacus_ray/sweep_dir.py): every file and folder, the
sweep root recognised from where a command is pointed, and an older sweep's timeline still read by
the dashboard. Local directories, no Ray."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from abacus_ray import storage
from abacus_ray.cli.dashboard import default_out
from abacus_ray.evaluation.locate import eval_targets
from abacus_ray.storage import on_disk
from abacus_ray.sweep_dir import SweepDir
from dashboards.build import build_site
from dashboards.sample import synthetic_results


def test_every_file_and_folder_is_named_under_the_sweep_root(tmp_path):
    dirs = SweepDir(storage.resolve(tmp_path), "fig10_k")
    root = tmp_path / "fig10_k"
    assert Path(dirs.root) == root
    named = {"spec": "sweep.json", "tune": "tune", "train": "train", "results": "results",
             "search": "search.parquet", "timeline": "timeline.parquet",
             "trials": "trials.parquet"}
    assert {k: Path(getattr(dirs, k)) for k in named} == {k: root / v for k, v in named.items()}
    assert Path(dirs.train_run("fig10_k/max_k=12_seed=0")) == root / "train" / "max_k=12_seed=0"
    assert Path(dirs.train_run("s/a b<c>", "ab12")) == root / "train" / "a_b_c_"  # no older one
    (root / "train" / "train-ab12").mkdir(parents=True)
    assert Path(dirs.train_run("s/x", "ab12")) == root / "train" / "train-ab12"  # an older sweep's
    assert dirs.local == dirs.tracking == root  # a local --storage: MLflow's store in the sweep
    assert dirs.dashboard == root / "dashboard"
    assert not dirs.recorded
    (root / "sweep.json").parent.mkdir(exist_ok=True)
    (root / "sweep.json").write_text("{}")
    assert dirs.recorded


def test_a_sweep_root_is_recognised_from_itself_and_its_results(tmp_path):
    results = synthetic_results(tmp_path / "runs" / "s" / "results", [("s/a", ["seed=0"])],
                                [(1, 1)], per_cell=2)
    loc = storage.resolve(results)
    assert SweepDir.holding(loc) == SweepDir.at(loc.parent) == SweepDir(loc.parent.parent, "s")
    assert SweepDir.at(loc.parent.parent) is None  # a storage root is no sweep root
    assert SweepDir.holding(storage.resolve(tmp_path / "runs" / "s")) is None
    assert default_out(loc) == default_out(loc.parent) == tmp_path / "runs" / "s" / "dashboard"
    place, = eval_targets(loc.parent.parent)
    assert (Path(place.models), Path(place.results)) == (Path(loc.parent), Path(loc))


def _timeline_table() -> pa.Table:
    return pa.Table.from_pylist([{
        "run": "s/a", "trial_id": "0", "node_id": "A" * 16, "pid": 1, "workers": 1,
        "resources": '{"CPU": 1.0}', "trainer": "function", "start_s": 10.0, "end_s": 40.0,
        "status": "finished"}])


def _timeline_view(site: Path) -> dict | None:
    page = (site / "sweep-s.html").read_text()
    if 'id="timeline-section"' not in page:
        return None
    data = re.search(r'id="dashboard-data">(.*?)</script>', page, re.S).group(1)
    return json.loads(data)["timeline"]


def test_an_older_sweeps_timeline_is_still_read(tmp_path):
    results = synthetic_results(tmp_path / "s" / "results", [("s/a", ["seed=0"])], [(1, 1)],
                                per_cell=2)
    dirs = SweepDir.of(storage.resolve(Path(results).parent))
    assert Path(dirs.timeline_to_read()) == tmp_path / "s" / "timeline.parquet"  # neither there
    pq.write_table(_timeline_table(), tmp_path / "s" / "cluster.parquet")  # what older sweeps wrote
    assert Path(dirs.timeline_to_read()) == tmp_path / "s" / "cluster.parquet"
    view = _timeline_view(build_site(on_disk(tmp_path / "s"), tmp_path / "site").parent)
    assert view is not None and len(view["traces"]) == 1
    newer = _timeline_table().set_column(0, "run", pa.array(["s/b"]))
    pq.write_table(newer, tmp_path / "s" / "timeline.parquet")  # the new name wins over the old
    assert Path(dirs.timeline_to_read()) == tmp_path / "s" / "timeline.parquet"
    view = _timeline_view(build_site(on_disk(tmp_path / "s"), tmp_path / "site").parent)
    assert view is not None and "b: " in json.dumps(view)
