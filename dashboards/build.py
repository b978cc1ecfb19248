"""`build_site(results, out_dir)`: the static dashboard site of a results tree.

The site is self-contained and works offline (opened as files): plotly.js is copied from the
installed `plotly` package into `assets/` beside the pages, never fetched from a CDN. Each file is
written to a temporary name and renamed into place, so a browser (or `serve.py`) reading while a
rebuild runs sees either the old or the new page. `stamp.json` names the Parquet parts the site was
built from; a served page polls it to notice new results.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from abacus_ray import storage
from abacus_ray.storage import Location
from dashboards.data import load_cells, signature
from dashboards.site import (
    INDEX,
    PAPER,
    ClaimOf,
    index_page,
    paper_page,
    sweep_page,
    sweep_page_name,
    sweep_verdicts,
)
from dashboards.sitedata import SiteData

STATIC = Path(__file__).with_name("static")
STAMP = "stamp.json"


def plotly_js() -> Path:
    """The minified plotly.js bundled with the `plotly` Python package."""
    try:
        import plotly  # heavy and checked: its absence is one line, at build time only
    except ImportError as e:  # pragma: no cover - plotly is a declared dependency
        raise ValueError(
            "plotly: the dashboards need the plotly package (pip install plotly)"
        ) from e
    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise ValueError(f"plotly: {path} is missing; reinstall the plotly package")
    return path


def stamp_of(sig: tuple) -> str:
    return hashlib.sha256(json.dumps(sig).encode()).hexdigest()[:16]


def _copy(src: Path, dst: Path) -> None:
    """An asset copied into the site unless the copy there is already current."""
    if (
        dst.exists()
        and dst.stat().st_size == src.stat().st_size
        and dst.stat().st_mtime >= src.stat().st_mtime
    ):
        return
    storage.copy_file(storage.on_disk(src), storage.on_disk(dst))


def write_assets(out_dir: Path) -> None:
    assets = out_dir / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    _copy(plotly_js(), assets / "plotly.min.js")
    for name in ("dashboard.js", "paper.js", "dashboard.css"):
        _copy(STATIC / name, assets / name)


def build_site(results: Location, out_dir: Path,
               claims: ClaimOf | None = None) -> Path:
    """Build (or rebuild) the dashboards of `results` into `out_dir`; returns the index page's
    path.

    `results` may be a results directory, a sweep root holding `results/`, or a storage root with
    several sweeps (`evaluation.locate.results_dirs`), resolved by the caller. `claims`
    finds each sweep's figure claim, whose verdicts the index page lists first.
    """
    out = Path(out_dir)
    sig = signature(results)
    cells = load_cells(results)
    data = SiteData.from_cells(cells)
    stamp = stamp_of(sig)
    out.mkdir(parents=True, exist_ok=True)
    write_assets(out)
    source = str(results)  # the path, or the URI (its query kept, no credentials)
    verdicts = sweep_verdicts(data, claims) if claims is not None else []
    pages = {INDEX: index_page(data, source, verdicts), PAPER: paper_page(data)}
    for name in sorted(set(cells["sweep"])):
        pages[sweep_page_name(name)] = sweep_page(data, name, stamp)
    site = storage.on_disk(out)
    storage.write_files(site, pages)
    for old in out.glob("sweep-*.html"):  # sweeps that are gone from the results
        if old.name not in pages:
            storage.delete(site / old.name)
    # last: a served page polls it
    storage.write_files(site, {STAMP: json.dumps({"stamp": stamp, "parts": len(sig)})})
    return (out / INDEX).resolve()
