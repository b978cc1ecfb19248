"""Untrusted files are harmless: checkpoints never run pickled code, results never become markup.

* Every `torch.load` in the code base is weights-only and nothing else deserialises with pickle (an
  AST scan of the sources, so a new call site without `weights_only=True` fails here).
* A malicious pickle (a `__reduce__` that would create a marker file through `os.system` or `exec`),
  planted as `model.pt` or `train_state.pt` of an otherwise valid checkpoint, in four container
  formats, is refused with one line naming the file (CLI exit 2) on every path that loads
  checkpoints (`abacus-ray eval`, `abacus-ray train --resume`, the Ray Data evaluator actor's loader,
  `eval-all` before Ray starts, `import-official` for one under the safetensors name), in one wording
  (`model/unsafe.py`: it holds code that a weights-only load will not run, naming what it would call,
  never advising the unsafe load), with no library warning before it, and the marker is never
  created. A positive control shows that each payload does run code when unpickled unsafely.
* A results part whose Arrow schema carries a pickled Python extension type is read as data only.
* The dashboards escape every user-supplied string: run ids, model ids, config values, sweep and
  directory names, `sweep.json`'s preset. The site built from hostile results has exactly the DOM of
  the site built from benign stand-ins, its JSON data block cannot close its `<script>`, and the
  hostile strings reach the pages as text; in headless Chromium (where installed) Plotly shows them as
  text too.
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import os
import pickle
import re
import shutil
import sys
import warnings
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from refusal import SMALL_MODEL, _save, assert_refused, tally

from abacus_ray.cli import main as cli_main
from abacus_ray.evaluation.results import read_cells, write_part
from abacus_ray.model.checkpoint import load_checkpoint
from abacus_ray.model.checkpoint import load_weights_file as load_checkpoint_file
from abacus_ray.model.unsafe import code_it_names, unsafe_file
from abacus_ray.storage import on_disk

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("abacus_ray", "dashboards", "sweeps", "benchmarks")


# --- no unsafe deserialisation anywhere -------------------------------------------------------------------

PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "marshal", "shelve", "jsonpickle"}


def _python_sources() -> list[Path]:
    return sorted(p for d in SOURCES for p in (REPO / d).rglob("*.py"))


@pytest.mark.slow  # over a second: out of the fast tier
def test_every_load_in_the_code_base_is_weights_only():
    torch_loads, problems = [], []
    for path in _python_sources():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                problems += [f"{where}: imports {n}" for n in names if n.split(".")[0] in PICKLE_MODULES]
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            keywords = {k.arg: k.value for k in node.keywords}
            if owner == "torch" and name == "load":
                torch_loads.append(where)
                flag = keywords.get("weights_only")
                if not (isinstance(flag, ast.Constant) and flag.value is True):
                    problems.append(f"{where}: torch.load without weights_only=True")
            if owner in ("np", "numpy") and name == "load":
                flag = keywords.get("allow_pickle")
                if flag is not None and not (isinstance(flag, ast.Constant) and flag.value is False):
                    problems.append(f"{where}: np.load with allow_pickle")
            if owner == "yaml" and name in ("load", "unsafe_load", "full_load"):
                problems.append(f"{where}: yaml.{name}")
            if isinstance(func, ast.Name) and name in ("eval", "exec"):
                problems.append(f"{where}: builtin {name}()")
    assert problems == []
    assert torch_loads == ["abacus_ray/model/checkpoint.py:" + torch_loads[0].rsplit(":", 1)[1]], torch_loads
    tally("untrusted: source scan (torch.load sites, imports)", 1)


# --- malicious pickles --------------------------------------------------------------------------------------

class SystemPayload:
    """Unpickling calls os.system: creates the marker file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


class ExecPayload:
    """Unpickling calls builtins.exec: creates the marker file from Python."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (builtins.exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


def malicious_bytes(payload_cls: type, marker: Path, container: str) -> bytes:
    """A file whose unpickling runs `payload_cls`'s code, inside a dict like a real state_dict."""
    obj = {"decoder.weight": torch.zeros(2), "x": payload_cls(marker)}
    buf = io.BytesIO()
    if container.startswith("raw-pickle"):  # protocol 2, or 5 (torch warns about it before refusing)
        pickle.dump(obj, buf, protocol=5 if container.endswith("-5") else 2)
    elif container == "torch-zip":
        torch.save(obj, buf)
    else:  # the pre-1.6 torch format
        torch.save(obj, buf, _use_new_zipfile_serialization=False)
    return buf.getvalue()


PAYLOADS = [SystemPayload, ExecPayload]
CONTAINERS = ["raw-pickle", "raw-pickle-5", "torch-zip", "torch-legacy"]
CALLS = {SystemPayload: f"{os.system.__module__}.system", ExecPayload: "builtins.exec"}  # what each would call


def refused_quietly(argv: list[str], culprit: str, payload: type, roots: list[Path]) -> str:
    """`assert_refused`, plus: the message is the one wording (model/unsafe.py) naming what the file would
    call, it never advises the unsafe load, and no library warning came before it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        message = assert_refused(argv, culprit, "untrusted: malicious pickle", roots=roots)
    assert [str(w.message) for w in caught] == []
    assert message == unsafe_file(culprit, CALLS[payload]), message
    assert "weights_only=False" not in message and "damaged" not in message
    return message


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return _save(tmp_path_factory.mktemp("untrusted") / "ck", [*SMALL_MODEL, "model.abacus_table=128"])


@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda c: c.__name__)
def test_positive_control_the_payloads_run_code_when_loaded_unsafely(payload, container, tmp_path):
    marker = tmp_path / "marker"
    data = malicious_bytes(payload, marker, container)
    if container.startswith("raw-pickle"):
        pickle.loads(data)  # noqa: S301 (the point of the control)
    else:
        torch.load(io.BytesIO(data), weights_only=False)  # noqa: S614 (the point of the control)
    assert marker.exists()


def planted(ckpt: Path, tmp_path: Path, file: str, payload: type, container: str) -> tuple[Path, Path]:
    """(run directory holding a copy of `ckpt` as step-000000001 with `file` malicious, marker path)."""
    marker = tmp_path / "marker"
    run_dir = tmp_path / "run"
    target = run_dir / "step-000000001"
    shutil.copytree(ckpt, target)
    (target / file).write_bytes(malicious_bytes(payload, marker, container))
    return target, marker


@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda c: c.__name__)
def test_malicious_weights_are_refused_on_every_loading_path(payload, container, ckpt, tmp_path, no_ray):  # noqa: F811
    from abacus_ray.cluster.grid_eval import CellEvaluator
    from abacus_ray.config.evaluation import EvalConfig

    target, marker = planted(ckpt, tmp_path, "model.pt", payload, container)
    culprit = str(target / "model.pt")
    out = tmp_path / "results"
    refused_quietly(["eval", str(target), "--out", str(out), "--cells", "1x1", "--quiet"], culprit, payload, [tmp_path])
    refused_quietly(["eval", str(target.parent), "--out", str(out), "--cells", "1x1", "--quiet"], culprit, payload,
                    [tmp_path])  # a run directory: its latest checkpoint
    refused_quietly(["train", "--out", str(target.parent), "--resume", "--device", "cpu"], culprit, payload, [tmp_path])
    refused_quietly(["eval-all", str(target.parent)], culprit, payload, [tmp_path])
    with pytest.raises(ValueError) as e:  # the loader the Ray Data evaluator actors use
        CellEvaluator("cpu", EvalConfig())._load(str(target))
    assert str(e.value) == unsafe_file(culprit, CALLS[payload])
    with pytest.raises(ValueError) as e:
        load_checkpoint(on_disk(target))
    assert str(e.value) == unsafe_file(culprit, CALLS[payload])
    tally("untrusted: malicious pickle", 2)
    assert not marker.exists() and not out.exists()


@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda c: c.__name__)
def test_malicious_training_state_is_refused(payload, container, ckpt, tmp_path):
    target, marker = planted(ckpt, tmp_path, "train_state.pt", payload, container)
    culprit = str(target / "train_state.pt")
    refused_quietly(["train", "--out", str(target.parent), "--resume", "--device", "cpu"], culprit, payload, [tmp_path])
    loaded = load_checkpoint(on_disk(target))  # weights are fine; the state is only read when asked for
    with pytest.raises(ValueError) as e:
        _ = loaded.state
    assert str(e.value) == unsafe_file(culprit, CALLS[payload])
    tally("untrusted: malicious pickle")
    assert not marker.exists()


@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda c: c.__name__)
def test_a_malicious_pickle_as_an_official_checkpoint_is_refused_in_the_same_words(payload, container, tmp_path):
    from test_import_official import official_arch

    source = tmp_path / "official"
    source.mkdir()
    (source / "model_config.json").write_text(json.dumps(official_arch("abacus", 1, 1, False)))
    marker = tmp_path / "marker"
    (source / "model.safetensors").write_bytes(malicious_bytes(payload, marker, container))
    refused_quietly(["import-official", str(source), "--out", str(tmp_path / "out")],
                    str(source / "model.safetensors"), payload, [tmp_path])
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_benign_files_name_no_code(ckpt, tmp_path):
    """The scan behind the wording finds nothing in real checkpoints (zip and legacy torch files) and
    in files that are no whole pickle, so they keep their own descriptions (truncated, empty, text)."""
    state = torch.load(ckpt / "train_state.pt", weights_only=True)
    weights = torch.load(ckpt / "model.pt", weights_only=True)
    legacy = tmp_path / "legacy.pt"
    torch.save(weights, legacy, _use_new_zipfile_serialization=False)
    torch.save({**state, "rng": torch.get_rng_state()}, tmp_path / "state.pt")
    for path in (ckpt / "model.pt", ckpt / "train_state.pt", legacy, tmp_path / "state.pt"):
        assert code_it_names(path) is None, path
    cut = tmp_path / "cut.pt"
    cut.write_bytes(malicious_bytes(SystemPayload, tmp_path / "m", "raw-pickle")[:-3])  # no STOP: not a pickle
    assert code_it_names(cut) is None
    with pytest.raises(ValueError, match="truncated or corrupt pickle"):
        load_checkpoint_file(cut)
    tally("untrusted: benign files scanned", 6)


def test_a_pickled_arrow_extension_type_in_results_is_not_unpickled(tmp_path, ckpt):
    """CVE-2023-47248 shape: Arrow field metadata naming `arrow.py_extension_type` with a pickle."""
    from dashboards.sample import synthetic_results

    marker = tmp_path / "marker"
    results = synthetic_results(tmp_path / "s" / "results", [("s/run", [])], [(1, 1)], per_cell=4)
    part = next(results.glob("part-*.parquet"))
    table = pq.read_table(part)
    evil = pa.field("evil", pa.int64(), metadata={b"ARROW:extension:name": b"arrow.py_extension_type",
                                                  b"ARROW:extension:metadata": pickle.dumps(SystemPayload(marker))})
    table = table.append_column(evil, pa.array([1] * table.num_rows, pa.int64()))
    part.unlink()
    write_part(on_disk(results), table)
    try:
        read_cells(on_disk(results))
        for argv in (["summary", str(results)], ["dashboard", str(results), "--out", str(tmp_path / "site")]):
            assert cli_main(argv) in (0, 2)
    except ValueError:
        pass  # refusing the file is as good as reading it as data
    assert not marker.exists()
    tally("untrusted: pickled Arrow extension type")


# --- dashboards escape every user-supplied string -------------------------------------------------------------

HOSTILE = {
    "script": "<script>alert(1)</script>",
    "attr": '"><img src=x onerror=alert(2)>',
    "single": "'><svg onload=alert(3)>",
    "close": "</script><script>alert(4)</script>",
    "comment": "<!--<script>alert(5)//-->",
    "cdata": "]]><iframe src=javascript:alert(6)>",
    "link12": "<a href=//e>",  # 12 characters: the dashboards show model ids cut to 12
    "js": "javascript:alert(7)",
    "sep": "\u2028</ScRiPt >\u2029",
    "template": "{{7*7}}${7*7}%{x}",
    "entity": "&lt;b&gt;pre-escaped&amp;",
}
DIR_NAME = "<iframe src=x onload=alert(8)>"  # a sweep directory whose rows carry no sweep in their run id
PRESET = "<script>alert(9)</script>"
ATOMS = [*HOSTILE.values(), DIR_NAME, PRESET]


def user_strings(r) -> dict[str, str]:
    """Column -> user-supplied value, built from atoms passed through `r` (identity: hostile; else benign).

    The run id's part before the first '/' names the sweep; model ids are cut to 12 characters on pages.
    """
    h = {k: r(v) for k, v in HOSTILE.items()}
    return {"run_id": f"{h['attr']}/{h['script']} {h['close']}", "model_id": h["link12"], "trial_id": h["comment"],
            "checkpoint": h["cdata"], "device": h["sep"], "worker": h["template"], "engine": h["entity"],
            "precision": h["js"], "name": h["single"], "model.positions": h["script"], "model.injection": h["attr"],
            "model.norm": h["close"], "task.index_hints": h["comment"], "train.precision": h["single"],
            "cluster.trainer": h["link12"]}


def _rewrite(results: Path, strings: dict[str, str]) -> None:
    """Replace string columns of every part; run and model ids keep a per-model suffix so models stay apart."""
    for part in results.glob("part-*.parquet"):
        table = pq.read_table(part)
        for column, value in strings.items():
            old = table.column(column).to_pylist()
            if column == "run_id":
                new = [value + v[-1] for v in old]
            elif column == "model_id":
                new = [value + v[: 64 - len(value)] for v in old]
            else:
                new = [value] * len(old)
            table = table.set_column(table.schema.get_field_index(column), column, pa.array(new, pa.string()))
        part.unlink()
        write_part(on_disk(results), table)


def _results_tree(root: Path, r) -> Path:
    """Two sweeps of synthetic rows whose user strings are built from `r(atom)`."""
    from dashboards.sample import synthetic_results

    pairs = [(i, j) for i in range(1, 5) for j in range(1, 5)] + [(6, 6), (8, 8)]
    first = synthetic_results(root / "a" / "results", [("a/run0", ["seed=0"]), ("a/run1", ["seed=1"])], pairs)
    _rewrite(first, user_strings(r))
    second = synthetic_results(root / r(DIR_NAME) / "results", [("x", [])], pairs)
    _rewrite(second, {"run_id": r(HOSTILE["single"])})  # no '/': the directory names the sweep
    (root / r(DIR_NAME) / "sweep.json").write_text(json.dumps({"preset": r(PRESET)}))
    return root


class Audit(HTMLParser):
    """What a browser would build: tags with attribute names, text, raw script bodies."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: Counter = Counter()
        self.attrs: list[tuple[str, str, str]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._script: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags[(tag, tuple(sorted(a for a, _ in attrs)))] += 1
        self.attrs += [(tag, a, v or "") for a, v in attrs]
        if tag == "script" and dict(attrs).get("type") == "application/json":
            self._script = []

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None

    def handle_data(self, data):
        (self._script if self._script is not None else self.text).append(data)


def audit(path: Path) -> Audit:
    a = Audit()
    a.feed(path.read_text(encoding="utf-8"))
    a.close()
    return a


@pytest.mark.slow  # over a second: out of the fast tier
def test_dashboards_escape_every_user_supplied_string(tmp_path):
    from dashboards.build import STATIC, build_site

    benign = {atom: f"benign{k}" for k, atom in enumerate(ATOMS)}
    hostile_site = build_site(on_disk(_results_tree(tmp_path / "hostile", lambda a: a)), tmp_path / "site-h").parent
    benign_site = build_site(on_disk(_results_tree(tmp_path / "benign", benign.get)), tmp_path / "site-b").parent

    def structure(site: Path) -> list[str]:  # tag + attribute names of every element, page by page
        return sorted(repr(sorted(audit(p).tags.items())) for p in site.glob("*.html"))

    # Escaping means the hostile strings never change the documents' structure ...
    assert len(structure(hostile_site)) == 4  # index, paper, two sweeps
    assert structure(hostile_site) == structure(benign_site)
    shown, data_strings = [], []
    for page in sorted(hostile_site.glob("*.html")):
        a = audit(page)
        assert not [x for x in a.attrs if x[1].startswith("on")], page.name
        assert not [x for x in a.attrs if x[1] in ("href", "src", "action") and
                    re.sub(r"\s", "", x[2]).lower().startswith(("javascript:", "data:", "//", "http"))], page.name
        for tag, attr, value in a.attrs:
            if tag == "script":
                assert (attr, value) in (("src", "assets/plotly.min.js"), ("src", "assets/dashboard.js"),
                                         ("type", "application/json"), ("id", "dashboard-data")), (page.name, attr)
        raw = page.read_text(encoding="utf-8")
        assert not re.search(r"<(img|svg|iframe)|<a href=//", raw), page.name
        for body in a.scripts:  # the JSON data block: nothing in it can end the <script> or open a comment
            assert body.strip(), page.name
            assert "</" not in body and "<!--" not in body and "<script" not in body.lower(), page.name
            data_strings.append(json.dumps(json.loads(body), ensure_ascii=False))
        shown.append("".join(a.text))
    text, data = "\n".join(shown), "\n".join(data_strings)
    # ... and that they reach the reader intact, as text or as data for the page script.
    for value in (HOSTILE["script"], HOSTILE["attr"], HOSTILE["close"], HOSTILE["single"]):
        assert value in text or value in data, value
    assert HOSTILE["attr"] in text and DIR_NAME in text and PRESET in text
    assert HOSTILE["link12"] in data  # the 12-character model id, shown in the heatmap title by dashboard.js
    for asset in ("dashboard.js", "dashboard.css"):
        assert (hostile_site / "assets" / asset).read_bytes() == (STATIC / asset).read_bytes()
    tally("dashboards: hostile strings escaped", len(user_strings(str)) + 2)


CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


@pytest.mark.slow  # a real browser (`make browser-deps`)
def test_hostile_strings_stay_text_in_a_browser(tmp_path):
    """The page script hands run and model ids to Plotly, which renders a subset of HTML (<a href>, <b>) in
    titles: in headless Chromium the hostile sweep page raises no dialog, loads nothing, and its heatmap
    title shows the markup as text (no link element)."""
    # `make browser-deps`, a prerequisite of `make test`
    from playwright import sync_api as playwright_api

    assert Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM}: run `make browser-deps`"
    from dashboards.build import build_site
    from dashboards.site import sweep_page_name

    site = build_site(on_disk(_results_tree(tmp_path / "hostile", lambda a: a)), tmp_path / "site").parent
    page_path = site / sweep_page_name(HOSTILE["attr"])
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=CHROMIUM,
                                                       headless=True, args=flags)
        try:
            page = browser.new_page()
            dialogs, errors, remote = [], [], []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
            page.goto(page_path.as_uri())
            page.wait_for_selector("body[data-rendered='1']", timeout=20_000)
            title = page.evaluate("document.querySelector('#heatmap .gtitle').textContent")
            links = page.evaluate("[...document.querySelectorAll('#heatmap a, #lines a, #bars a')].length")
            injected = page.evaluate("document.querySelectorAll('img, iframe, svg script').length")
        finally:
            browser.close()
    assert dialogs == [] and errors == [] and remote == []
    assert HOSTILE["link12"] in title and HOSTILE["script"] in title, title
    assert links == 0 and injected == 0
    tally("dashboards: hostile strings escaped")


if sys.platform == "win32":  # pragma: no cover - POSIX shells only (os.system payload)
    pytest.skip("POSIX only", allow_module_level=True)
