"""Dashboards without a browser: results discovery, labels, heatmap and bar numbers, paper values and
their provenance, escaping of hostile names, the static site's size and offline-ness, the live server
and the CLI. Data are made-up cell rows (`dashboards.sample.synthetic_results`): no training here."""

import json
import re
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from abacus_ray import storage
from abacus_ray.cli import main as cli_main
from abacus_ray.config import preset
from abacus_ray.evaluation.aggregate import wilson_interval
from abacus_ray.evaluation.locate import results_dirs
from abacus_ray.evaluation.results import config_columns, write_cells
from abacus_ray.storage import on_disk
from dashboards import paper_values
from dashboards.build import build_site
from dashboards.data import arch_label, block_label, checkpoint_label, load_cells, signature
from dashboards.heatmaps import entry_grids, group_grids
from dashboards.models import count_params, model_info
from dashboards.sample import synthetic_results
from dashboards.serve import make_server
from dashboards.site import sweep_page_name
from dashboards.sitedata import SiteData

SQUARE = [(i, j) for i in range(1, 7) for j in range(1, 7)]
PAPER_TEXT = Path(__file__).with_name("paper_excerpts.txt")  # the paper's lines that print the values we cite
HOSTILE = "<script>alert('x')</script><b>bold</b> & \"q\""
HOSTILE_SWEEP = "<img src=x onerror=alert(1)>"  # the sweep is the run id's part before the first '/'



def write_two_seeds(root: Path, sweep: str = "fig10_k", run: str = "max_k=6", pairs=SQUARE) -> Path:
    models = [(f"{sweep}/{run}_seed={s}", ["model.max_k=6", f"seed={s}"]) for s in (0, 1)]
    return synthetic_results(root / sweep / "results", models, pairs, per_cell=20)


# --- discovery and labels --------------------------------------------------------------------------

def test_results_dirs_accepts_results_sweep_and_storage_roots(tmp_path):
    write_two_seeds(tmp_path, "a")
    write_two_seeds(tmp_path, "b")
    def found(path):  # storage Locations (abacus_ray.storage), compared by their local paths
        return [loc.as_path() for loc in results_dirs(storage.resolve(path))]

    assert found(tmp_path / "a" / "results") == [tmp_path / "a" / "results"]
    assert found(tmp_path / "a") == [tmp_path / "a" / "results"]
    assert found(tmp_path) == [tmp_path / "a" / "results", tmp_path / "b" / "results"]


def test_results_dirs_errors_name_the_argument(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^RESULTS: "):
        results_dirs(storage.resolve(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"^RESULTS: .* holds no abacus-ray results"):
        results_dirs(storage.resolve(tmp_path / "empty"))


def test_architecture_labels_follow_the_paper():
    assert arch_label(16, 1, "first") == "ST"
    assert arch_label(16, 1, "every") == "ST w/ II"
    assert arch_label(1, 16, "every") == "LT"
    assert arch_label(8, 2, "first") == "LT (inject first)"
    assert block_label(8, 2) == "8x2"


def test_rows_get_sweep_run_entry_and_seed_group(tmp_path):
    write_two_seeds(tmp_path, "fig10_k")
    cells = load_cells(storage.resolve(tmp_path))
    assert set(cells["sweep"]) == {"fig10_k"}
    assert cells["entry"].nunique() == 2 and cells["group"].nunique() == 1
    assert sorted(set(cells["run"])) == ["fig10_k/max_k=6_seed=0", "fig10_k/max_k=6_seed=1"]
    assert set(cells["arch"]) == {"ST w/ II"} and set(cells["block"]) == {"2x1"}


def test_rows_keep_the_location_of_their_results_directory(tmp_path):
    """The sweep's side tables (search, timeline) are found from the `Location` each row was read
    from, not from its URI parsed again."""
    write_two_seeds(tmp_path, "fig10_k")
    root = storage.resolve(tmp_path)
    cells = load_cells(root)
    assert all(d == results_dirs(root)[0] for d in cells["results_dir"])


def test_a_checkpoint_names_its_run_by_the_last_two_parts_of_its_path():
    """Read as a `Location`: a URI's query (an S3-compatible endpoint) is not part of the name."""
    assert checkpoint_label("/data/runs/tiny/step-000020/") == "tiny/step-000020"
    uri = "s3://bkt/runs/tiny/step-000020?endpoint_override=127.0.0.1:8333&scheme=http"
    assert checkpoint_label(uri) == "tiny/step-000020"
    assert checkpoint_label("hf://org/model") is None and checkpoint_label(None) is None


def test_run_without_sweep_prefix_takes_the_directory_name(tmp_path):
    synthetic_results(tmp_path / "mysweep" / "results", [("plain-run", [])], SQUARE)
    cells = load_cells(storage.resolve(tmp_path / "mysweep"))
    assert set(cells["sweep"]) == {"mysweep"} and set(cells["run"]) == {"plain-run"}


def test_run_without_an_id_is_named_after_its_checkpoint(tmp_path):
    # `abacus-ray eval CHECKPOINT` without --run-id writes a null run_id (it was shown as "nan")
    from abacus_ray.evaluation.results import read_cells

    synthetic_results(tmp_path / "made", [("x", []), ("y", [])], SQUARE)
    rows = read_cells(on_disk(tmp_path / "made"))
    first = rows["model_id"] == rows["model_id"].iloc[0]
    rows["run_id"] = None
    rows.loc[first, "checkpoint"] = str(tmp_path / "runs" / "tiny" / "step-000020")  # only its last two parts name it
    write_cells(on_disk(tmp_path / "evals" / "results"), rows.astype(object).where(rows.notna(), None).to_dict("records"))
    cells = load_cells(storage.resolve(tmp_path / "evals"))
    runs = dict(zip(cells["model_id"], cells["run"], strict=False))
    assert runs[rows.loc[first, "model_id"].iloc[0]] == "tiny/step-000020"
    assert runs[rows.loc[~first, "model_id"].iloc[0]] == "tiny"  # no checkpoint either: the config's name
    assert "nan" not in set(cells["run"])


# --- numbers ---------------------------------------------------------------------------------------

def test_entry_grid_holds_each_cell_with_its_wilson_interval(tmp_path):
    write_two_seeds(tmp_path)
    cells = load_cells(storage.resolve(tmp_path))
    grids = entry_grids(cells)
    one = cells[cells["entry"] == 0].sort_values(["i", "j"])
    g = grids[0]
    assert g["i"] == one["i"].tolist() and g["j"] == one["j"].tolist()
    assert g["acc"] == pytest.approx((100 * one["accuracy"]).round(2).tolist())
    lo, hi = wilson_interval(one["n_correct"].to_numpy(), one["n"].to_numpy())
    assert g["lo"] == pytest.approx((100 * lo).round(2).tolist())
    assert g["hi"] == pytest.approx((100 * hi).round(2).tolist())


def test_seed_mean_grid_averages_runs_cell_by_cell(tmp_path):
    write_two_seeds(tmp_path)
    cells = load_cells(storage.resolve(tmp_path))
    g = group_grids(cells)[0]
    for k, (i, j) in enumerate(zip(g["i"], g["j"], strict=True)):
        both = cells[(cells["i"] == i) & (cells["j"] == j)]
        assert g["acc"][k] == pytest.approx(round(100 * both["accuracy"].mean(), 2))
        assert g["n"][k] == both["n"].sum() and g["runs"][k] == 2


def test_bars_spread_matches_per_seed_region_means(tmp_path):
    write_two_seeds(tmp_path, pairs=SQUARE + [(7, 7), (8, 8)])
    data = SiteData.from_cells(load_cells(storage.resolve(tmp_path)))
    ood = data.means[data.means["view"] == "ood"].sort_values("entry")["accuracy"].to_numpy()
    stats = data.spreads["accuracy"][0]["ood"]
    assert stats["runs"] == 2
    assert stats["mean"] == pytest.approx(round(100 * ood.mean(), 2))
    assert stats["std"] == pytest.approx(round(100 * np.std(ood, ddof=1), 2))


def test_params_from_config_on_the_meta_device_and_meta_json(tmp_path):
    cfg = preset("tiny")
    row = {"model_id": "m", "checkpoint": None, **config_columns(cfg)}
    from abacus_ray.model.transformer import ArithmeticTransformer

    assert count_params(row) == ArithmeticTransformer.for_experiment(cfg).num_params()
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "meta.json").write_text(json.dumps({"model_id": "m", "num_params": 7, "step": 3, "samples": 192,
                                              "device_hours": 0.5, "budget_fraction": 1.0}))
    info = model_info({**row, "checkpoint": str(ck)})
    assert (info.params, info.step, info.samples, info.device_hours, info.source) == (7, 3, 192, 0.5, "meta.json")
    assert model_info({**row, "checkpoint": str(tmp_path / "gone")}).source == "config"


# --- paper values ----------------------------------------------------------------------------------

def test_paper_values_are_well_formed_and_cite_a_page():
    doc = paper_values.load()
    ids = [f["id"] for f in doc["figures"]]
    for wanted in ("fig3_left", "fig3_right", "fig4", "fig9", "fig10", "fig17", "fig18", "fig19", "table1", "table2"):
        assert wanted in ids
    for fig in doc["figures"]:
        for v in fig["values"]:
            assert re.match(r"^p\. \d+, ", v["source"]), v["source"]
            assert 0 <= v["value"] <= 100


def test_spot_values_from_the_paper():
    doc = {f["id"]: f for f in paper_values.load()["figures"]}

    def value(fig, view, **match):
        hits = [v["value"] for v in doc[fig]["values"] if v["view"] == view
                and all({**v["match"], **v["setting"]}.get(k) == x for k, x in match.items())]
        assert len(hits) == 1, (fig, view, match, hits)
        return hits[0]

    assert value("fig4", "ood", block="8x2") == 99.1
    assert value("fig4", "ood100plus", block="1x16") == 13.7
    assert value("fig9", "ood", arch="LT", **{"model.positions": "abacus", "task.train_max_len": 40}) == 99.1
    assert value("table1", "all_ood_20", **{"model.positions": "abacus+fire"}) == 16.91
    hits = [v["value"] for v in doc["table2"]["values"] if v["metric"] == "first_accuracy" and v["match"]["arch"] == "LT"]
    assert hits == [68.51]


def test_every_nonzero_paper_value_is_printed_on_its_page():
    pages = re.split(r"--- PAGE (\d+) ---", PAPER_TEXT.read_text())
    by_page = {int(pages[k]): pages[k + 1] for k in range(1, len(pages) - 1, 2)}
    for fig in paper_values.load()["figures"]:
        for v in fig["values"]:
            page = int(re.match(r"^p\. (\d+)", v["source"]).group(1))
            if v["value"] == 0:
                continue
            text = by_page[page].replace(" ", "")
            printed = f"{v['value']:.2f}" if fig["id"] in ("table1", "table2") else f"{v['value']:.1f}"
            if fig["id"] == "fig10":
                printed = "95%"
            assert printed in text, (fig["figure"], v)


def _groups(rows):
    return pd.DataFrame(rows)


def test_compare_prefers_same_setting_then_falls_back_to_scaled():
    doc = {"figures": [{"id": "f", "figure": "Fig. X", "task": "add", "sweeps": ["s"], "values": [
        {"match": {"arch": "LT"}, "setting": {"block": "8x2"}, "view": "ood", "metric": "accuracy", "value": 90,
         "source": "p. 1, x"}]}]}
    spreads = {"accuracy": {0: {"ood": {"mean": 50.0, "std": 1.0, "runs": 3}},
                            1: {"ood": {"mean": 60.0, "std": None, "runs": 1}}}, "first_accuracy": {}}
    base = {"sweep": "s", "task.name": "add", "arch": "LT"}
    same = paper_values.compare(pd.DataFrame(), _groups([{**base, "group": 0, "block": "8x2"},
                                                         {**base, "group": 1, "block": "2x2"}]), spreads, doc)
    assert [(r["group"], r["ours"], r["scaled"]) for r in same] == [(0, 50.0, False)]
    scaled = paper_values.compare(pd.DataFrame(), _groups([{**base, "group": 1, "block": "2x2"}]), spreads, doc)
    assert [(r["group"], r["ours"], r["scaled"], r["our_setting"]) for r in scaled] == [(1, 60.0, True, "block=2x2")]
    foreign = paper_values.compare(pd.DataFrame(), _groups([{**base, "sweep": "other", "group": 1, "block": "2x2"}]),
                                   spreads, doc)
    assert [(r["group"], r["ours"]) for r in foreign] == [(None, None)]  # no relaxed match outside the figure
    wrong_task = paper_values.compare(pd.DataFrame(), _groups([{**base, "task.name": "sort", "group": 0,
                                                                "block": "8x2"}]), spreads, doc)
    assert wrong_task[0]["ours"] is None


# --- the site --------------------------------------------------------------------------------------

def test_site_is_offline_and_escapes_hostile_names(tmp_path):
    synthetic_results(tmp_path / "s" / "results", [(f"{HOSTILE_SWEEP}/{HOSTILE}", []), ("plain/run", ["seed=1"])],
                      SQUARE)
    index = build_site(on_disk(tmp_path / "s"), tmp_path / "site")
    site = index.parent
    pages = sorted(site.glob("*.html"))
    assert index.name == "index.html" and len(pages) == 4  # index, paper, two sweeps
    for page in pages:
        text = page.read_text()
        assert "<script>alert" not in text and "<b>bold" not in text and "<img" not in text
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), page  # nothing fetched from the web
        scripts = re.findall(r"<script[^>]*>", text)
        assert all(s in ('<script src="assets/plotly.min.js">', '<script src="assets/dashboard.js">',
                         '<script src="assets/paper.js">',
                         '<script type="application/json" id="dashboard-data">') for s in scripts), scripts
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;" in index.read_text()
    assert "&lt;img src=x onerror=alert(1)&gt;" in index.read_text()
    hostile_page = site / sweep_page_name(HOSTILE_SWEEP)
    block = re.search(r'id="dashboard-data">(.*?)</script>', hostile_page.read_text(), re.S).group(1)
    assert json.loads(block)["entries"][0]["run"] == f"{HOSTILE_SWEEP}/{HOSTILE}"
    assert (site / "assets" / "plotly.min.js").stat().st_size > 1_000_000


def test_sweep_file_names_are_safe_and_distinct():
    names = {sweep_page_name(n) for n in ("fig10_k", "../x", "a/b", "a_b", HOSTILE)}
    assert len(names) == 5 and "sweep-fig10_k.html" in names
    assert all(re.fullmatch(r"sweep-[A-Za-z0-9_.-]+\.html", n) for n in names)


def test_demo_sized_site_is_under_15_mb(tmp_path):
    # The demo: tiny Fig. 10 (4 k values; here 2 seeds each), diagonal 1..30 plus the 1..12 square.
    pairs = [(i, j) for i in range(1, 13) for j in range(1, 13)] + [(n, n) for n in range(13, 31)]
    models = [(f"fig10_k/max_k={k}_seed={s}", [f"model.max_k={k}", f"seed={s}"]) for k in (6, 12, 19, 25) for s in (0, 1)]
    synthetic_results(tmp_path / "fig10_k" / "results", models, pairs)
    index = build_site(on_disk(tmp_path / "fig10_k"), tmp_path / "site")
    size = sum(f.stat().st_size for f in index.parent.rglob("*") if f.is_file())
    assert size < 15 * 2**20, size
    data = json.loads(re.search(r'id="dashboard-data">(.*?)</script>',
                                (index.parent / "sweep-fig10_k.html").read_text(), re.S).group(1))
    assert [d["key"] for d in data["dims"]][:5] == ["run", "seed", "positions", "arch", "k"]
    assert len(data["entries"]) == 8 and len(data["groups"]) == 4
    assert data["varying"] == ["k"]  # abacus_table follows k in the tiny preset: no extra "variant" selector


def test_rebuild_drops_pages_of_vanished_sweeps(tmp_path):
    write_two_seeds(tmp_path, "a")
    build_site(on_disk(tmp_path), tmp_path / "site")
    assert (tmp_path / "site" / "sweep-a.html").exists()
    for f in (tmp_path / "a" / "results").glob("part-*"):
        f.unlink()
    write_two_seeds(tmp_path, "b")
    build_site(on_disk(tmp_path), tmp_path / "site")
    assert not (tmp_path / "site" / "sweep-a.html").exists() and (tmp_path / "site" / "sweep-b.html").exists()


# --- serving and the CLI ---------------------------------------------------------------------------

def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 (loopback only)
        return r.read()


@pytest.mark.slow  # over a second: out of the fast tier
def test_server_binds_loopback_and_rebuilds_when_parts_arrive(tmp_path):
    write_two_seeds(tmp_path, "live")
    results = storage.resolve(tmp_path / "live" / "results")
    server, site = make_server(results, tmp_path / "site", port=0)
    host, port = server.server_address[:2]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert host == "127.0.0.1"
        base = f"http://{host}:{port}"
        first = json.loads(_get(base + "/stamp.json"))["stamp"]
        assert b"live/max_k=6_seed=0" in _get(base + "/sweep-live.html")
        assert site.builds == 1
        assert json.loads(_get(base + "/stamp.json"))["stamp"] == first and site.builds == 1  # nothing new
        cfg = preset("tiny", ["seed=2"])
        write_cells(on_disk(tmp_path / "live" / "results"), [{
            "model_id": "new", "run_id": "live/streamed", "task": "add", "i": 1, "j": 1, "region": "id", "n_train": 5,
            "n": 4, "n_correct": 4, "accuracy": 1.0, "n_first_correct": 4, "per_cell": 20, "eval_seed": 0,
            "recurrences": 1, "require_eos": True, **config_columns(cfg)}])
        assert json.loads(_get(base + "/stamp.json"))["stamp"] != first and site.builds == 2
        assert b"live/streamed" in _get(base + "/sweep-live.html")
    finally:
        server.shutdown()
        server.server_close()


def test_signature_changes_with_parts_only(tmp_path):
    write_two_seeds(tmp_path, "s")
    sig = signature(storage.resolve(tmp_path))
    (tmp_path / "s" / "results" / "notes.txt").write_text("x")
    assert signature(storage.resolve(tmp_path)) == sig
    write_two_seeds(tmp_path, "s", run="other")
    assert signature(storage.resolve(tmp_path)) != sig
    assert signature(storage.resolve(tmp_path / "missing")) == ()


@pytest.mark.slow  # over a second: out of the fast tier
def test_cli_builds_the_site_and_reports_bad_input(tmp_path, capsys):
    write_two_seeds(tmp_path, "fig10_k")
    assert cli_main(["dashboard", str(tmp_path / "fig10_k"), "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.strip() == str((tmp_path / "out" / "index.html").resolve())
    assert cli_main(["dashboard", str(tmp_path / "fig10_k" / "results")]) == 0  # default: beside results/
    assert (tmp_path / "fig10_k" / "dashboard" / "index.html").exists()
    assert cli_main(["dashboard", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("abacus-ray dashboard: error: RESULTS: ") and err.count("\n") == 1
    assert cli_main(["dashboard", str(tmp_path), "--serve", "--port", "70000"]) == 2
    assert "--port: must be 0..65535" in capsys.readouterr().err


def test_sorting_sweep_gets_tables_and_first_token_grids(tmp_path):
    sort = ["task.name=sort", "task.train_max_len=3", "task.train_max_array=3"]
    models = [(f"table1_sorting/positions={p}_seed={s}", [*sort, f"model.positions={p}", f"seed={s}"])
              for p in ("abacus", "fire") for s in (0, 1)]
    pairs = [(i, j) for i in range(1, 7) for j in range(1, 7)]
    synthetic_results(tmp_path / "table1_sorting" / "results", models, pairs, task="sort", per_cell=10)
    index = build_site(on_disk(tmp_path), tmp_path / "site")
    html = (index.parent / "sweep-table1_sorting.html").read_text()
    data = json.loads(re.search(r'id="dashboard-data">(.*?)</script>', html, re.S).group(1))
    assert data["has_sort"] and data["varying"] == ["positions"]
    assert {"first", "first_lo", "first_hi"} <= set(data["grids"]["e0"])
    assert [v for v, _ in data["views"]["sort"]] == ["id", "ood_digits_30", "ood_array_30", "all_ood_30", "all_ood_20"]
    assert "Sorting (Tables 1–2)" in html and "All OOD (30x30), min. elem. only" in html
    paper = (index.parent / "paper.html").read_text()
    # our tiny runs beside Table 1, with where they differ from the paper's setting
    assert "table1_sorting: arch=ST w/ II, block=2x1, task.train_max_len=3, task.train_max_array=3" in paper


def test_paper_page_shows_figures_with_runs_as_paired_bars_and_lists_the_rest(tmp_path):
    sort = ["task.name=sort", "task.train_max_len=3", "task.train_max_array=3"]
    models = [(f"table1_sorting/positions={p}", [*sort, f"model.positions={p}"]) for p in ("abacus", "fire")]
    pairs = [(i, j) for i in range(1, 7) for j in range(1, 7)]
    synthetic_results(tmp_path / "table1_sorting" / "results", models, pairs, task="sort", per_cell=10)
    index = build_site(on_disk(tmp_path), tmp_path / "site")
    html = (index.parent / "paper.html").read_text()
    assert "<h2>Table 1</h2>" in html and "<h2>Fig. 4</h2>" not in html and "no matching run" not in html
    assert '<script src="assets/paper.js">' in html and (index.parent / "assets" / "paper.js").is_file()
    [line] = re.findall(r'<p class=note id="not-run">(.*?)</p>', html)
    assert line.startswith("Not yet run: Fig. 3 (left) (abacus-ray sweep fig3_embeddings --preset tiny);")
    assert "Fig. 4 (abacus-ray sweep fig4_depth_recurrence --preset tiny)" in line and "Table 1" not in line
    bars = json.loads(re.search(r'id="dashboard-data">(.*?)</script>', html, re.S).group(1))["paper_bars"]
    assert list(bars) == ["table1"]
    b = bars["table1"]
    table1 = {f["id"]: f for f in paper_values.load()["figures"]}["table1"]
    ran = [v["value"] for v in table1["values"] if v["match"]["model.positions"] in ("abacus", "fire")]
    assert len(ran) < len(table1["values"]) and b["paper"] == ran  # NoPE was not run: no bars for it
    # one model per condition and 10 problems in every cell: the interval is the pooled Wilson interval
    cells = load_cells(storage.resolve(tmp_path))
    fire = cells[cells["model.positions"] == "fire"]
    ood_digits = fire[(fire["i"] > 3) & (fire["j"] <= 3)]
    lo, hi = wilson_interval(int(ood_digits["n_correct"].sum()), int(ood_digits["n"].sum()))
    k = b["x"].index(next(x for x in b["x"] if x.startswith("fire") and "number length" in x and "min." not in x))
    assert b["ours"][k] == pytest.approx(round(100 * ood_digits["accuracy"].mean(), 2))
    assert (b["lo"][k], b["hi"][k]) == (pytest.approx(round(100 * lo, 2)), pytest.approx(round(100 * hi, 2)))
    assert all(lo <= v <= hi for lo, v, hi in zip(b["lo"], b["ours"], b["hi"], strict=True))
    sweep = (index.parent / "sweep-table1_sorting.html").read_text()
    assert "no matching run" not in sweep and "95 % interval" in sweep


def test_per_recurrence_series_for_a_model_scored_at_several_depths(tmp_path):
    looped = ["model.layers=1", "model.recurrences=4"]
    for r in (1, 2, 3, 4):
        synthetic_results(tmp_path / "fig15" / "results", [("fig15/r", looped)], [(12, 12)], recurrences=r, seed=r)
    index = build_site(on_disk(tmp_path), tmp_path / "site")
    html = (index.parent / "sweep-fig15.html").read_text()
    data = json.loads(re.search(r'id="dashboard-data">(.*?)</script>', html, re.S).group(1))
    assert [(s["view"], s["x"]) for s in data["recurrence"]] == [("ood", [1, 2, 3, 4])]
    cells = load_cells(storage.resolve(tmp_path))
    want = [round(100 * cells[cells["recurrences"] == r]["accuracy"].iloc[0], 2) for r in (1, 2, 3, 4)]
    assert data["recurrence"][0]["y"] == want
    assert "Accuracy per test-time recurrence" in html


def test_search_view_counts_each_status_and_escapes_a_hostile_one():
    import pandas as pd

    from dashboards.search import search_section

    ends = (("a", "finished"), ("b", "diverged"), ("c", "stopped"), ("d", "<b>x</b>"))
    rows = [{"run": f"s/{r}", "status": st, "params": "{}", "best": 0.5, "last": 0.5, "step": 10,
             "metric": 0.5} for r, st in ends]
    text = "".join(str(part) for part in search_section(pd.DataFrame(rows)))
    assert "4 configurations tried (1 finished, 1 stopped, 1 diverged)" in text
    assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text  # the status column, escaped
