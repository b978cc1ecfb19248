"""The pages: an index of sweeps and models, one interactive page per sweep, and "paper vs ours".

Tables are rendered here (escaped HTML, readable without JavaScript); plots are drawn in the browser
by `static/dashboard.js` from the sweep page's data block.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from abacus_ray.evaluation.claims import Claim, Verdict, judge
from dashboards import paper_values
from dashboards.bars import ARITH_VIEWS, SORT_VIEWS, VIEW_LABELS
from dashboards.html import Raw, esc, fmt_int, fmt_num, fmt_pct, link, page, table
from dashboards.payload import group_labels, sweep_payload
from dashboards.search import load_search, search_payload, search_section
from dashboards.sitedata import SiteData
from dashboards.sorting import sorting_table
from dashboards.timeline import gantt, load_timeline, timeline_section

INDEX, PAPER = "index.html", "paper.html"
# A sweep's figure claim from its name and rows (`api.verdicts.claim_for`), None: no claim
ClaimOf = Callable[[str, pd.DataFrame], Claim | None]
CLAIMS_NOTE = ("Each figure's claim, judged on its sweep's results: not learned at this scale "
               "where an arm's in-distribution exact match is under 90 % (nothing compared); "
               "else shown or contradicted where the 95 % intervals (and, at several seeds, the "
               "seed spreads) separate; else not shown at this scale. Paper: what the paper "
               "reports for the same arms and cells; Ours: each arm's ID rate, then the rates and "
               "intervals that decide.")
SCRIPTS = ("plotly.min.js", "dashboard.js")
PAPER_SCRIPTS = ("plotly.min.js", "paper.js")


def sweep_page_name(name: str) -> str:
    """A file name for a sweep page that no sweep name can turn into a path or markup."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._")[:60] or "sweep"
    if slug != name:
        slug += "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"sweep-{slug}.html"


def nav(data: SiteData) -> list[tuple[str, str]]:
    return [
        (INDEX, "Index"),
        *[(sweep_page_name(s), s) for s in sorted(set(data.cells["sweep"]))],
        (PAPER, "Paper vs ours"),
    ]


# --- tables
# ----------------------------------------------------------------------------------------

def _family(task: str) -> str:
    return "sort" if task == "sort" else "arith"


def _views(family: str) -> tuple[str, ...]:
    return SORT_VIEWS if family == "sort" else ARITH_VIEWS


def models_table(data: SiteData, family: str, *, with_sweep: bool = True) -> Raw | None:
    """One row per entry (model x eval settings): config, cost, region means (%)."""
    entries = data.entries[[_family(t) == family for t in data.entries["task"]]]
    if entries.empty:
        return None
    variants = data.variant_columns()
    views = _views(family)
    acc = {int(r.entry): {} for r in entries.itertuples()}
    for r in data.means.itertuples(index=False):
        if int(r.entry) in acc:
            acc[int(r.entry)][r.view] = r.accuracy
    cols = (["Sweep"] if with_sweep else []) + [
        "Run",
        "Model",
        "Task",
        "Embedding",
        "Architecture",
        "k",
        "Train length",
        "Seed",
        *variants,
        "Params",
        "Steps",
        "Samples",
        "Device-h",
        "Budget %",
        "Test rec.",
        "Cells",
        *[f"{VIEW_LABELS[v]} %" for v in views],
    ]
    rows = []
    for r in entries.to_dict("records"):
        info = data.infos.get(r["model_id"])
        budget = (
            None if info is None or info.budget_fraction is None else 100 * info.budget_fraction
        )
        row = ([link(sweep_page_name(r["sweep"]), r["sweep"])] if with_sweep else []) + [
            r["run"],
            str(r["model_id"])[:12],
            r["task"],
            r.get("model.positions"),
            f"{r['arch']} {r['block']}",
            r.get("model.max_k"),
            r.get("task.train_max_len"),
            r.get("seed"),
            *[r.get(c) for c in variants],
            fmt_int(info.params if info else None),
            fmt_int(info.step if info else None),
            fmt_int(info.samples if info else None),
            fmt_num(info.device_hours if info else None),
            fmt_pct(budget),
            r.get("recurrences"),
            fmt_int(r.get("cells_n")),
            *[
                fmt_pct(None if v not in acc[int(r["entry"])] else 100 * acc[int(r["entry"])][v])
                for v in views
            ],
        ]
        rows.append(row)
    first_num = cols.index("Params")
    return table(cols, rows, numeric=[False] * first_num + [True] * (len(cols) - first_num))


def groups_table(
    data: SiteData, family: str, labels: dict[int, str], *, with_sweep: bool = True
) -> Raw | None:
    """One row per seed group: mean ± std (min–max) over runs of each region mean (%)."""
    groups = data.groups[[_family(t) == family for t in data.groups["task"]]]
    if groups.empty:
        return None
    views = _views(family)
    cols = (["Sweep"] if with_sweep else []) + ["Condition", "Task", "Test rec.", "Runs",
                                                *[f"{VIEW_LABELS[v]} %" for v in views]]
    rows = []
    for g in groups.to_dict("records"):
        gid = int(g["group"])
        stats = data.spreads["accuracy"].get(gid, {})
        runs = max([s["runs"] for s in stats.values()], default=0)
        cells = []
        for v in views:
            s = stats.get(v)
            if not s:
                cells.append("—")
                continue
            text = fmt_pct(s["mean"], s["std"])
            if s["runs"] > 1:
                text += f" ({s['min']:.1f}–{s['max']:.1f})"
            cells.append(text)
        rows.append(([link(sweep_page_name(g["sweep"]), g["sweep"])] if with_sweep else [])
                    + [labels.get(gid, str(gid)), g["task"], g.get("recurrences"), runs, *cells])
    start = cols.index("Runs")
    return table(cols, rows, numeric=[False] * start + [True] * (len(cols) - start))


def paper_table(rows: list[dict[str, Any]]) -> Raw:
    cols = [
        "Figure",
        "Condition",
        "Quantity",
        "Paper %",
        "Ours %",
        "95 % interval",
        "Runs",
        "Our setting",
        "Source",
    ]
    body = []
    for r in rows:
        paper = f"{'≥ ' if r['relation'] == '>=' else ''}{r['paper']:g}"
        ours = fmt_pct(r["ours"], r["std"]) if r["ours"] is not None else (r.get("note") or "—")
        ci = f"{r['lo']:.1f}–{r['hi']:.1f}" if r.get("lo") is not None else "—"
        setting = r["our_setting"] or ("same" if r["ours"] is not None and not r["scaled"] else "")
        if r["sweep"]:
            setting = f"{r['sweep']}: {setting}" if setting else r["sweep"]
        body.append(
            [
                r["figure"],
                r["condition"],
                r["quantity"],
                paper,
                ours,
                ci,
                r["runs"] or "—",
                setting,
                r["source"],
            ]
        )
    return table(
        cols,
        body,
        cls="data paper",
        numeric=[False, False, False, True, True, True, True, False, False],
    )


def _paper_rows(data: SiteData) -> list[dict[str, Any]]:
    return paper_values.compare(data.cells, data.groups, data.spreads)


def _ran(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows that one of our runs matched (a value with no matching run is
    listed once, by figure)."""
    return [r for r in rows if r["group"] is not None]


def paper_bars(rows: list[dict[str, Any]], labels: dict[int, str] | None = None) -> dict[str, Any]:
    """Paired bars for the browser: per compared value, the paper's number beside
    ours with its interval."""
    several = len({r["group"] for r in rows}) > 1
    out: dict[str, Any] = {
        "x": [],
        "paper": [],
        "relation": [],
        "ours": [],
        "lo": [],
        "hi": [],
        "runs": [],
    }
    for r in rows:
        if r["ours"] is None:
            continue
        name = f"{r['condition']} · {r['quantity']}"
        if several:
            name += f" · {(labels or {}).get(r['group'], r['sweep'] or '')}".rstrip(" ·")
        out["x"].append(name)
        out["paper"].append(r["paper"])
        out["relation"].append(r["relation"])
        out["ours"].append(r["ours"])
        out["lo"].append(r["lo"])
        out["hi"].append(r["hi"])
        out["runs"].append(r["runs"])
    return out


def not_run_line(rows: list[dict[str, Any]], doc: dict[str, Any]) -> str | None:
    """One line naming the figures none of our runs matched, each with the command that runs it."""
    ran = {r["figure_id"] for r in _ran(rows)}
    left = [f for f in doc["figures"] if f["id"] not in ran and f.get("values")]
    if not left:
        return None
    return (
        "Not yet run: "
        + "; ".join(
            f"{f['figure']} ({paper_values.run_command(f)})" if f.get("sweeps") else f["figure"]
            for f in left
        )
        + "."
    )


def sweep_verdicts(data: SiteData, claim_of: ClaimOf) -> list[tuple[str, Verdict]]:
    """Each sweep's figure claim judged on its own rows (sweeps no figure claims left out)."""
    out = []
    for name in sorted(set(data.cells["sweep"])):
        sub = data.cells[data.cells["sweep"] == name]
        claim = claim_of(name, sub)
        if claim is not None:
            paper = "preset" in sub.columns and set(sub["preset"].dropna()) == {"paper"}
            out.append((name, judge(claim, sub, paper_scale=paper)))
    return out


def claims_table(verdicts: Sequence[tuple[str, Verdict]]) -> Raw:
    """One row per sweep: its figure, the claim, what the paper reports beside our verdict and the
    evidence that decides it; the sweep links to its page (heatmaps and plots)."""
    rows = [[link(sweep_page_name(name), name), v.claim.figure, v.claim.text,
             v.claim.paper or "—", v.verdict, v.evidence] for name, v in verdicts]
    cols = ["Sweep", "Figure", "Claim", "Paper", "Verdict", "Ours"]
    return table(cols, rows, cls="data claims")


# --- pages
# -----------------------------------------------------------------------------------------

def index_page(data: SiteData, source: str, verdicts: Sequence[tuple[str, Verdict]] = ()) -> str:
    sweeps = []
    for name in sorted(set(data.cells["sweep"])):
        sub = data.cells[data.cells["sweep"] == name]
        presets = (
            sorted({str(p) for p in sub["preset"].dropna()}) if "preset" in sub.columns else []
        )
        sweeps.append(
            [
                link(sweep_page_name(name), name),
                ", ".join(presets) or "—",
                sub["model_id"].nunique(),
                sub["entry"].nunique(),
                sub["group"].nunique(),
                fmt_int(len(sub)),
                ", ".join(sorted(set(sub["task"]))),
                max(sub["evaluated_at"].dropna().astype(str), default="—"),
            ]
        )
    body = [
        f"<h1>abacus-ray results</h1><p class=muted>From {esc(source)}: "
        f"{fmt_int(len(data.cells))} cells of {data.cells['model_id'].nunique()} models. "
        "Accuracies are exact-match percentages; region means weigh every cell equally (paper "
        "§3); ± is the standard deviation over training seeds.</p>",
        *(
            ["<h2>Claims</h2>", f"<p class=muted>{esc(CLAIMS_NOTE)}</p>", claims_table(verdicts)]
            if verdicts
            else []
        ),
        "<h2>Sweeps</h2>",
        table(
            [
                "Sweep",
                "Preset",
                "Models",
                "Evaluations",
                "Seed groups",
                "Cells",
                "Tasks",
                "Last evaluated",
            ],
            sweeps,
            numeric=[False, False, True, True, True, True, False, False],
        ),
    ]
    labels: dict[int, str] = {}
    for name in sorted(set(data.cells["sweep"])):
        labels |= group_labels(data.sweep(name))
    for family, title in (("arith", "Arithmetic"), ("sort", "Sorting")):
        g = groups_table(data, family, labels)
        m = models_table(data, family)
        if g is not None:
            body += [f"<h2>{title}: means over seeds</h2>", g]
        if m is not None:
            body += [f"<h2>{title}: models</h2>", m]
    return page("abacus-ray results", "\n".join(map(str, body)), nav=nav(data))


def sweep_page(data: SiteData, name: str, stamp: str) -> str:
    sub = data.sweep(name)
    labels = group_labels(sub)
    reports = load_search(sub.cells)
    timeline = load_timeline(sub.cells)
    payload = {
        **sweep_payload(sub, name, stamp),
        "search": search_payload(reports),
        "timeline": gantt(timeline),
    }
    body = [f"<h1>{esc(name)}</h1>",
            f"<p class=muted>{sub.cells['model_id'].nunique()} models, {len(sub.entries)} "
            f"evaluations, {fmt_int(len(sub.cells))} cells. Heatmaps: operand one down, operand "
            "two across, fixed 0–100 % colour scale, red square = training distribution. Hover a "
            "cell for its numbers and 95 % interval.</p>",
            '<section id="controls" class="controls"></section>',
            '<section><h2>Accuracy heatmap</h2><div id="heatmap" class="plot '
            'square"></div></section>',
            '<section id="errors-section"><h2>Errors in a cell</h2><p class=muted>Click a heatmap '
            'cell: where in the answer this model first goes wrong, and how (carry: one digit off '
            'after a carry; length: a digit missing or extra; other), with an example.</p><div '
            'id="errors" class="plot"></div><p id="errors-example" class="example"></p></section>',
            '<section id="lines-section"><h2>Accuracy on the i = j diagonal</h2><div '
            'id="lines-controls" class="controls"></div><div id="lines" '
            'class="plot"></div></section>',
            '<section><h2>Region means with per-seed points</h2><div id="bars" '
            'class="plot"></div></section>']
    body += search_section(reports)
    body += timeline_section(timeline)
    sort_html = sorting_table(sub, labels)
    if sort_html is not None:
        body += ["<section><h2>Sorting (Tables 1–2)</h2>", sort_html, "</section>"]
    if payload["recurrence"]:
        body.append('<section><h2>Accuracy per test-time recurrence (Fig. 15)</h2>'
                    '<div id="recurrence" class="plot"></div></section>')
    rows = [r for r in _paper_rows(data) if r["sweep"] == name]
    if rows:
        body += ['<section><h2>Paper vs ours</h2><p class=muted>The paper\'s printed values '
                 'beside our seed means (± std over seeds; the interval is the evaluation '
                 'sample\'s 95 % Wilson interval); "Our setting" lists where our runs differ from '
                 f'the paper\'s. {link(PAPER, "All figures")}.</p>',
                 paper_table(rows), "</section>"]
    for family, title in (("arith", "Arithmetic"), ("sort", "Sorting")):
        g = groups_table(sub, family, labels, with_sweep=False)
        m = models_table(sub, family, with_sweep=False)
        if g is not None:
            body += [f"<section><h2>{title}: means over seeds</h2>", g, "</section>"]
        if m is not None:
            body += [f"<section><h2>{title}: models</h2>", m, "</section>"]
    return page(
        f"{name} — abacus-ray",
        "\n".join(map(str, body)),
        nav=nav(data),
        data=payload,
        scripts=SCRIPTS,
    )


def paper_page(data: SiteData) -> str:
    """Only the figures our runs match, each as paired bars (paper beside ours) and a table; one
    line lists the figures not run yet, with the command that runs each."""
    doc = paper_values.load()
    rows = _paper_rows(data)
    labels: dict[int, str] = {}
    for name in sorted(set(data.cells["sweep"])):
        labels |= group_labels(data.sweep(name))
    body = ["<h1>Paper vs ours</h1>",
            f"<p class=muted>{esc(doc['paper'])}. {esc(doc['how_read'])} {esc(doc['matching'])} "
            "Bars: the paper's value beside our seed mean; the whisker is the 95 % Wilson "
            "interval of our evaluation sample (problems), not the spread over training seeds (± "
            "std in the table).</p>"]
    bars: dict[str, Any] = {}
    for fig in doc["figures"]:
        mine = _ran([r for r in rows if r["figure_id"] == fig["id"]])
        if not mine:
            continue
        body.append(f"<section><h2>{esc(fig['figure'])}</h2><p "
                    f"class=muted>{esc(fig['caption'])}</p>")
        if fig.get("omitted"):
            body.append(f"<p class=note>{esc(fig['omitted'])}</p>")
        pairs = paper_bars(mine, labels)
        if pairs["x"]:
            bars[fig["id"]] = pairs
            body.append(f'<div id="paper-{esc(fig["id"])}" class="plot paper-bars"></div>')
        body += [str(paper_table(mine)), "</section>"]
    left = not_run_line(rows, doc)
    if left:
        body.append(f'<p class=note id="not-run">{esc(left)}</p>')
    if not bars:  # nothing to draw: a page without scripts
        return page("Paper vs ours — abacus-ray", "\n".join(body), nav=nav(data))
    return page(
        "Paper vs ours — abacus-ray",
        "\n".join(body),
        nav=nav(data),
        data={"paper_bars": bars},
        scripts=PAPER_SCRIPTS,
    )
