"""The dashboard's "Timeline" view: a sweep's timeline.parquet as a Gantt chart of trials per node, and a
table of each node's use (dashboards/timeline.py). A hand-made timeline, no Ray."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from abacus_ray.storage import on_disk
from dashboards.build import build_site
from dashboards.sample import synthetic_results
from dashboards.timeline import gantt, lanes, main

HOSTILE = "<img src=x onerror=alert(1)>"


def timeline_rows() -> pd.DataFrame:
    """Node A runs two trials at once then one more; node B one CPU trial (one name hostile)."""
    rows = [("s/a0", "A" * 16, '{"CPU": 1.0, "h100": 1.0}', 100.0, 130.0),
            ("s/a1", "A" * 16, '{"CPU": 1.0, "h100": 1.0}', 101.0, 128.0),
            ("s/a2", "A" * 16, '{"CPU": 1.0, "h100": 1.0}', 129.0, 160.0),
            (f"s/{HOSTILE}", "B" * 16, '{"CPU": 2.0, "cpu_pool": 2.0}', 100.5, 159.0)]
    return pd.DataFrame([{"run": r, "trial_id": str(i), "node_id": n, "pid": i, "workers": 1, "resources": res,
                          "trainer": "function", "start_s": s, "end_s": e,
                          "status": "diverged" if r == "s/a2" else "finished"}
                         for i, (r, n, res, s, e) in enumerate(rows)])


def test_trials_get_the_first_free_lane_of_their_node():
    df = lanes(timeline_rows()).set_index("run")
    assert df.loc["s/a0", "lane"] == 0 and df.loc["s/a1", "lane"] == 1
    assert df.loc["s/a2", "lane"] == 1  # a1 ended at 128, before a2 started at 129; a0 still runs
    fig = gantt(timeline_rows())
    assert sorted(t["name"] for t in fig["traces"]) == ["cpu_pool", "h100"]
    h100 = next(t for t in fig["traces"] if t["name"] == "h100")
    assert h100["base"] == [0.0, 1.0, 29.0] and h100["x"] == [30.0, 27.0, 31.0]
    assert h100["text"] == ["a0: 0–30 s, finished", "a1: 1–28 s, finished", "a2: 29–60 s, diverged"]
    assert HOSTILE not in json.dumps(fig)  # run names are escaped before they reach Plotly


@pytest.mark.slow  # over a second: out of the fast tier
def test_sweep_page_has_the_timeline_view_when_the_sweep_recorded_a_timeline(tmp_path):
    results = synthetic_results(tmp_path / "s" / "results", [("s/a0", ["seed=0"])], [(1, 1), (2, 2)], per_cell=5)
    index = build_site(on_disk(tmp_path / "s"), tmp_path / "site")
    assert 'id="timeline-section"' not in (index.parent / "sweep-s.html").read_text()  # nothing recorded: no view
    pq.write_table(pa.Table.from_pandas(timeline_rows(), preserve_index=False), Path(results).parent / "timeline.parquet")
    index = build_site(on_disk(tmp_path / "s"), tmp_path / "site")
    page = (index.parent / "sweep-s.html").read_text()
    assert 'id="timeline-section"' in page and HOSTILE not in page
    assert "4 trials on 2 nodes over 60 s (3 finished, 1 diverged)" in page
    data = json.loads(re.search(r'id="dashboard-data">(.*?)</script>', page, re.S).group(1))
    assert len(data["timeline"]["traces"]) == 2
    out = tmp_path / "gantt.html"
    assert main([str(Path(results).parent / "timeline.parquet"), str(out)]) == 0
    assert "plotly" in out.read_text().lower()
