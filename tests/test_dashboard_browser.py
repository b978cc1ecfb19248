"""The dashboards in a real browser: headless Chromium (Debian's `chromium`, never a downloaded build)
driven by Playwright, on a site built from a real tiny sweep (2 models trained for 20 steps, scored on
the 1..6 square plus the 7..9 diagonal, no Ray).

Checks: no console errors or dialogs on any page; every plot renders, with one heatmap cell per
evaluated cell in the DOM; the run selector changes the shown run; hovering a cell shows its values;
hostile run and sweep names (markup, `<script>`) appear as text and never run. The load time of the
sweep page is printed (not asserted) and a screenshot saved (DASHBOARD_SCREENSHOTS=dir keeps it).
`make browser-deps` (a prerequisite of `make test`) installs the browser; without it these tests fail
and say so: a missing browser is a missing input, not a reason to skip.
"""

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from abacus_ray.evaluation.results import read_cells
from abacus_ray.storage import on_disk
from dashboards.build import build_site
from dashboards.sample import make_sample
from dashboards.site import sweep_page_name

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
pytestmark = [pytest.mark.slow, pytest.mark.cost(35)]  # a real browser on a trained sample: `make test`, not `make test-fast`
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
RUN = "<script>alert('run')</script><b>bold</b> & co"
SWEEP = "<img src=x onerror=alert('sweep')>"



@pytest.fixture(scope="module")
def playwright_api():
    try:
        from playwright import sync_api
    except ImportError:
        pytest.fail("playwright is not installed: run `make browser-deps`")
    assert Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM}: run `make browser-deps` (apt-get install chromium)"
    return sync_api


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    make_sample(root, steps=20, run_names=("seed=0", RUN), second_sweep=SWEEP)
    index = build_site(on_disk(root), root / "dashboard")
    return root, index.parent


@pytest.fixture(scope="module")
def browser(tmp_path_factory, playwright_api):
    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh --user-data-dir
    with playwright_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True, args=FLAGS,
                                                   viewport={"width": 1400, "height": 1000})
        try:
            yield ctx
        finally:
            ctx.close()


class Watched:
    """A page that records console errors, uncaught exceptions, dialogs and requests off the machine."""

    def __init__(self, ctx):
        self.page = ctx.new_page()
        self.errors, self.dialogs, self.remote = [], [], []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("request", lambda r: self.remote.append(r.url) if not r.url.startswith(("file:", "data:")) else None)

    def open(self, path: Path) -> float:
        start = time.perf_counter()
        self.page.goto(path.as_uri())
        if self.page.query_selector("#dashboard-data"):
            self.page.wait_for_selector("body[data-rendered='1']", timeout=20_000)
        return time.perf_counter() - start

    def clean(self):
        assert self.errors == [] and self.dialogs == [] and self.remote == []
        assert self.page.evaluate("document.querySelectorAll('img').length") == 0
        srcs = self.page.evaluate("[...document.scripts].map(s => s.getAttribute('src') || s.type)")
        assert srcs in ([], ["application/json", "assets/plotly.min.js", "assets/dashboard.js"],
                        ["application/json", "assets/plotly.min.js", "assets/paper.js"]), srcs


def heatmap_title(page) -> str:
    return page.evaluate("document.querySelector('#heatmap .gtitle').textContent")


def test_every_page_loads_clean(site, browser):
    root, out = site
    pages = sorted(out.glob("*.html"))
    assert {p.name for p in pages} == {"index.html", "paper.html", sweep_page_name("sample"), sweep_page_name(SWEEP)}
    for path in pages:
        w = Watched(browser)
        w.open(path)
        w.clean()
        if path.name == "index.html":  # hostile names are shown, as text
            text = w.page.inner_text("main")
            assert f"sample/{RUN}" in text and SWEEP in text
        w.page.close()


def test_a_results_directory_with_problem_file_rows_draws_clean(site, browser, tmp_path):
    """The guide's layout of `eval --problems FILE --out RESULTS` beside grid cells: every page
    loads clean and the index counts the file's problems with the rest (it once failed to build:
    "columns overlap but no suffix specified: ['problems']")."""
    from abacus_ray.cli import main

    root, _ = site
    copy = tmp_path / "store"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("dashboard"))
    (checkpoint,) = sorted((copy / "sample" / "train" / "run0").glob("step-*"))
    problems = tmp_path / "mine.txt"
    problems.write_text("12+34\n5+678\n99+1\n")
    assert main(["eval", str(checkpoint), "--problems", str(problems),
                 "--out", str(copy / "sample" / "results")]) == 0
    out = build_site(on_disk(copy), copy / "dashboard").parent
    for path in sorted(out.glob("*.html")):
        w = Watched(browser)
        w.open(path)
        w.clean()
        w.page.close()


def test_paper_page_draws_paired_bars_with_intervals(browser, tmp_path):
    from dashboards.sample import synthetic_results

    sort = ["task.name=sort", "task.train_max_len=3", "task.train_max_array=3"]
    models = [(f"table1_sorting/positions={p}", [*sort, f"model.positions={p}"]) for p in ("abacus", "fire")]
    synthetic_results(tmp_path / "table1_sorting" / "results", models, [(i, j) for i in range(1, 7) for j in range(1, 7)],
                      task="sort", per_cell=10)
    out = build_site(on_disk(tmp_path), tmp_path / "site").parent
    w = Watched(browser)
    w.open(out / "paper.html")
    w.clean()
    bars = json.loads(w.page.text_content("#dashboard-data"))["paper_bars"]["table1"]
    # one paper bar and one of ours per compared value, ours with an error bar
    assert w.page.evaluate("document.querySelectorAll('#paper-table1 .barlayer .point').length") == 2 * len(bars["x"])
    assert w.page.evaluate("document.querySelectorAll('#paper-table1 .errorbar').length") == len(bars["x"])
    assert "Not yet run:" in w.page.inner_text("#not-run")
    w.page.close()


def test_sweep_page_plots_selectors_and_hover(site, browser):
    root, out = site
    cells = read_cells(on_disk(root / "sample" / "results"))
    w = Watched(browser)
    seconds = w.open(out / sweep_page_name("sample"))
    page = w.page

    # Every plot rendered; the heatmap has one labelled cell per evaluated cell (square 36 + diagonal 3).
    for div in ("heatmap", "lines", "bars"):
        assert page.evaluate(f"document.querySelectorAll('#{div} .main-svg').length") >= 1, div
    per_model = cells.groupby("model_id").size()
    assert set(per_model) == {39}
    assert page.evaluate("document.querySelectorAll('#heatmap .heatmap-label text').length") == 39
    assert page.evaluate("document.querySelectorAll('#heatmap .heatmaplayer image').length") == 1
    assert page.evaluate("document.querySelectorAll('#lines .scatterlayer .trace').length") == 2  # one per run
    assert page.evaluate("document.querySelectorAll('#bars .barlayer .point').length") == 2  # ID and OOD bars
    assert page.evaluate("document.querySelectorAll('#heatmap .layer-above path, #heatmap .shapelayer path').length") >= 1

    # The run selector changes the shown run (and the seed selector follows it).
    assert heatmap_title(page).startswith("sample/seed=0")
    before = page.evaluate("location.hash")
    page.select_option("#sel-run", f"sample/{RUN}")
    page.wait_for_function("document.querySelector('#heatmap .gtitle').textContent.includes('bold')")
    assert heatmap_title(page).startswith(f"sample/{RUN}")  # markup shown literally
    assert page.input_value("#sel-seed") == "1"
    assert page.evaluate("location.hash") != before  # the selection is kept in the URL
    legend = page.evaluate("[...document.querySelectorAll('#lines .legendtext')].map(t => t.textContent)")
    assert f"sample/{RUN}" in legend

    # Hover a cell: operand lengths, accuracy, n and the interval of that cell.
    i, j = 3, 4
    row = cells[(cells["run_id"] == f"sample/{RUN}") & (cells["i"] == i) & (cells["j"] == j)].iloc[0]
    x, y = page.evaluate(f"""() => {{
        const gd = document.getElementById('heatmap'), fl = gd._fullLayout, box = gd.getBoundingClientRect();
        return [box.left + fl._size.l + fl.xaxis.l2p({j}), box.top + fl._size.t + fl.yaxis.l2p({i})];
    }}""")
    page.mouse.move(x, y)
    page.wait_for_selector("#heatmap .hoverlayer .hovertext", timeout=5_000)
    hover = page.evaluate("document.querySelector('#heatmap .hoverlayer .hovertext').textContent")
    assert f"Length of Operand One: {i}" in hover and f"Length of Operand Two: {j}" in hover
    assert f"n = {row['n']}, {row['n_correct']} correct" in hover
    assert f"accuracy: {100 * row['accuracy']:.1f}%" in hover and "95% interval" in hover

    # Click the cell: the errors view shows that cell's wrong answers by class and one example.
    page.mouse.click(x, y)
    wrong = int(row["n"] - row["n_correct"])
    page.wait_for_function(f"(document.querySelector('#errors .gtitle') || document.querySelector('#errors .empty'))"
                           f".textContent.includes('{i}')")
    if wrong:
        title = page.evaluate("document.querySelector('#errors .gtitle').textContent")
        assert title.startswith(f"Length of Operand One {i}, Length of Operand Two {j}: {wrong} of {row['n']} wrong")
        for cls in ("carry", "length", "other"):
            assert f"{cls} {int(row[f'n_{cls}_errors'])}" in title
        assert page.text_content("#errors-example") == f"Example: {row['error_example']}"
    else:
        assert "every answer right" in page.text_content("#errors")

    # The seed mean of the two runs.
    page.select_option("#sel-mode", "mean")
    page.wait_for_function("document.querySelector('#heatmap .gtitle').textContent.includes('mean over 2')")
    assert page.is_disabled("#sel-run") and page.is_disabled("#sel-seed")
    assert page.evaluate("document.querySelectorAll('#heatmap .heatmap-label text').length") == 39

    w.clean()
    shot = root / "sweep.png"
    page.screenshot(path=str(shot), full_page=True)
    keep = os.environ.get("DASHBOARD_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / "dashboard_sweep.png")
    print(f"\nsweep page load (goto -> all plots drawn): {seconds:.2f} s")
    page.close()


def test_search_view_shows_the_tried_the_stopped_and_the_best(site, browser, tmp_path):
    """A sweep root with a search.parquet (cluster/search.py's writer) gets the "Search" section."""
    from abacus_ray import storage
    from abacus_ray.cluster.search import write_search_rows

    root, _ = site
    trials = [("sample/a", "finished", [0.1, 0.5, 0.8]), ("sample/b", "stopped", [0.05]),
              ("sample/c", "finished", [0.2, 0.6, 0.7])]
    rows = [{"run": run, "trial_id": run[-1], "status": status, "params": json.dumps({"model.max_k": n}),
             "best": max(validations), "last": validations[-1], "step": 100 * (s + 1), "metric": p, "loss": 1.0 - p,
             "elapsed_s": 10.0 * s} for n, (run, status, validations) in enumerate(trials) for s, p in enumerate(validations)]
    path = write_search_rows(storage.on_disk(root / "sample"), rows, "validation")
    try:
        out = build_site(on_disk(root), tmp_path / "dashboard").parent
    finally:
        path.as_path().unlink()
    w = Watched(browser)
    w.open(out / sweep_page_name("sample"))
    w.clean()
    page = w.page
    assert page.evaluate("document.querySelectorAll('#search .scatterlayer .trace').length") == 3
    dashes = page.evaluate("document.getElementById('search').data.map(t => t.line.dash)")
    assert dashes == ["solid", "dot", "solid"]  # the trial ASHA stopped is dotted
    best = page.evaluate("document.getElementById('search-best').data[0].y")
    assert best == pytest.approx([80.0, 80.0, 80.0])
    body = page.inner_text("#search-section table")
    lines = [line.split("\t")[0] for line in body.splitlines()[1:]]
    assert lines == ["a", "c", "b"]  # best last validation first
    assert "3 configurations tried (2 finished, 1 stopped)" in page.inner_text("#search-section")
    w.page.close()
