"""The trial timeline of a sweep page (its "Timeline" view): which node ran which trial when (a
Gantt chart), and how busy each node's trial slots were.

A sweep run through the Ray layer leaves `timeline.parquet` beside its `results/` (written by
`abacus_ray/cluster/outcome.py`: one row per trial with its node, requested resources, start and
end). Each node gets as many lanes as it ran trials at once; a bar is one trial, coloured by the
kind of resource it asked for (a custom resource standing for a GPU kind, or CPU). The same figure
is written as standalone HTML for docs/performance.md (`python -m dashboards.timeline`).
"""

from __future__ import annotations

import argparse
import html
import json
from pathlib import Path
from typing import Any

import pandas as pd

from abacus_ray import storage, trial_status
from abacus_ray.sweep_dir import SweepDir
from dashboards.data import sweep_table
from dashboards.html import Raw, fmt_int, table

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def load_timeline(cells: pd.DataFrame) -> pd.DataFrame | None:
    """The trial timeline of the sweep whose cells these are, or None when none were recorded
    (read under the timeline's older name too)."""
    return sweep_table(cells, SweepDir.timeline_to_read)


def kind(resources: str) -> str:
    """What a trial asked for, in one word: its first custom resource, else GPU or CPU."""
    bundle = json.loads(resources)
    custom = [k for k in bundle if k not in ("CPU", "GPU", "memory")]
    return custom[0] if custom else "GPU" if bundle.get("GPU") else "CPU"


def lanes(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with a `lane` per trial: the first lane of its node free when it starts
    (interval partitioning)."""
    out = []
    for _, node in rows.sort_values("start_s").groupby("node_id", sort=True):
        ends: list[float] = []
        for r in node.to_dict("records"):
            lane = next((i for i, e in enumerate(ends) if e <= r["start_s"]), len(ends))
            if lane == len(ends):
                ends.append(r["end_s"])
            else:
                ends[lane] = r["end_s"]
            out.append(r | {"lane": lane})
    return pd.DataFrame(out)


def gantt(rows: pd.DataFrame | None) -> dict[str, Any]:
    """Plotly traces and layout: one horizontal bar per trial on its node's lane,
    time from the first start."""
    if rows is None or rows.empty:
        return {"traces": [], "layout": {}}
    df = lanes(rows)
    t0 = df["start_s"].min()
    names = {n: f"node {i + 1} ({n[:6]})" for i, n in enumerate(sorted(df["node_id"].unique()))}
    df["y"] = [
        f"{names[n]} · {lane + 1}" for n, lane in zip(df["node_id"], df["lane"], strict=True)
    ]
    df["kind"] = [kind(r) for r in df["resources"]]
    traces = []
    for i, (k, part) in enumerate(df.groupby("kind", sort=True)):
        traces.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": html.escape(k),
                "y": list(part["y"]),
                "base": [s - t0 for s in part["start_s"]],
                "x": list(part["end_s"] - part["start_s"]),
                "marker": {"color": COLOURS[i % len(COLOURS)]},
                "textposition": "none",
                "hovertemplate": "%{text}<extra></extra>",
                "text": [
                    f"{html.escape(r.split('/', 1)[-1])}: {s - t0:.0f}–{e - t0:.0f} s, "
                    f"{html.escape(st)}"
                    for r, s, e, st in zip(
                        part["run"], part["start_s"], part["end_s"], _statuses(part), strict=True
                    )
                ],
            }
        )
    order = sorted(df["y"].unique(), reverse=True)
    return {
        "traces": traces,
        "layout": {
            "barmode": "overlay",
            "height": 120 + 22 * len(order),
            "margin": {"l": 150, "r": 20, "t": 30, "b": 40},
            "xaxis": {"title": {"text": "seconds since the first trial started"}},
            "yaxis": {"categoryorder": "array", "categoryarray": order},
            "legend": {"title": {"text": "asked for"}},
        },
    }


def _statuses(rows: pd.DataFrame) -> list[str]:
    """Each trial's status (`abacus_ray.trial_status`), as the timeline recorded it."""
    return [str(v) for v in rows["status"]] if "status" in rows.columns else ["?"] * len(rows)


def node_table(rows: pd.DataFrame) -> Raw:
    """Per node: trials, the busiest moment (lanes), and the share of the sweep's
    span its lanes were busy."""
    df = lanes(rows)
    span = df["end_s"].max() - df["start_s"].min()
    out = []
    for i, (node, part) in enumerate(sorted(df.groupby("node_id"), key=lambda x: x[0])):
        n_lanes = part["lane"].max() + 1
        busy = (part["end_s"] - part["start_s"]).sum() / (n_lanes * span) if span > 0 else 0.0
        out.append(
            [
                f"node {i + 1} ({node[:6]})",
                fmt_int(len(part)),
                fmt_int(n_lanes),
                f"{100 * busy:.0f}",
                ", ".join(sorted({kind(r) for r in part["resources"]})),
            ]
        )
    return table(["Node", "Trials", "At once", "Busy % of span", "Asked for"], out,
                 numeric=[False, True, True, True, False])


def timeline_section(rows: pd.DataFrame | None) -> list[Any]:
    """The page section (empty when the sweep recorded no timeline)."""
    if rows is None or rows.empty:
        return []
    span = rows["end_s"].max() - rows["start_s"].min()
    return [
        '<section id="timeline-section"><h2>Timeline</h2><p class=muted>'
        f"{len(rows)} trials on {rows['node_id'].nunique()} nodes over {span:.0f} s "
        f"({html.escape(trial_status.counts(_statuses(rows)) or 'no status recorded')}). "
        "Each bar is one trial on the node that ran it (one lane per trial running at once "
        "there), coloured by what it asked for; "
        'from the sweep\'s timeline.</p><div id="timeline" class="plot"></div>',
        node_table(rows),
        "</section>",
    ]


def main(argv: list[str] | None = None) -> int:
    """`python -m dashboards.timeline TIMELINE_PARQUET OUT_HTML`: the Gantt chart as a page."""
    # heavy: only the standalone page needs plotly's figure objects
    import plotly.graph_objects as go

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("parquet", help=f"a sweep's {SweepDir.TIMELINE} (or an older sweep's "
                   f"{SweepDir.OLD_TIMELINE}; a path or an object-store URI)")
    p.add_argument("out", type=Path, help="the HTML file to write")
    p.add_argument("--cdn", action="store_true",
                   help="load Plotly from its CDN when the page opens (a ~10 kB file) instead of "
                        "inlining it (offline, 4.6 MB)")
    args = p.parse_args(argv)
    fig = gantt(storage.read_parquet(storage.resolve(args.parquet)).to_pandas())  # resolved once
    page = go.Figure(data=fig["traces"], layout=fig["layout"]).to_html(
        include_plotlyjs="cdn" if args.cdn else True, full_html=True)
    # not run data: a standalone figure for the docs, at a path the user names
    storage.write_text(storage.on_disk(args.out), page)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
