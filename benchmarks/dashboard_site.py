"""Dashboard build time, site weight and browser load time, from the demo's size up to a paper-scale sweep.

Cell rows are made up (`dashboards.sample.synthetic_results`: binomial counts, no training), shaped
like the real sweeps: the demo (tiny Fig. 10: 4 k values, 1..12 square + 1..30 diagonal) and the
paper's Fig. 10 (4 k x 5 seeds on the 100 x 100 grid + the 1..120 diagonal). Load time is measured in
headless Chromium (goto -> every plot drawn) when Playwright and /usr/bin/chromium are there.

    python benchmarks/dashboard_site.py [--paper-seeds 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from abacus_ray import storage
from dashboards.build import build_site
from dashboards.sample import synthetic_results
from dashboards.site import sweep_page_name

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def square(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(1, n + 1) for j in range(1, n + 1)]


def scenarios(paper_seeds: int) -> dict[str, tuple[list, list]]:
    demo_pairs = square(12) + [(n, n) for n in range(13, 31)]
    demo = [(f"fig10_k/max_k={k}_seed=0", [f"model.max_k={k}"]) for k in (6, 12, 19, 25)]
    paper_pairs = square(100) + [(n, n) for n in range(101, 121)]
    paper = [(f"fig10_k/max_k={k}_seed={s}", [f"model.max_k={k}", f"seed={s}", "task.train_max_len=20"])
             for k in (25, 50, 75, 100) for s in range(paper_seeds)]
    return {"demo (tiny fig10)": (demo, demo_pairs), f"paper fig10 ({paper_seeds} seeds)": (paper, paper_pairs)}


def load_seconds(page_path: Path) -> float | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path(CHROMIUM).exists():
        return None
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = ctx.new_page()
        start = time.perf_counter()
        page.goto(page_path.as_uri())
        page.wait_for_selector("body[data-rendered='1']", timeout=120_000)
        seconds = time.perf_counter() - start
        ctx.close()
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paper-seeds", type=int, default=5)
    args = ap.parse_args()
    print(f"{'scenario':28s} {'models':>6s} {'cells':>8s} {'build s':>8s} {'site MB':>8s} {'page MB':>8s} {'load s':>7s}")
    for name, (models, pairs) in scenarios(args.paper_seeds).items():
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            synthetic_results(root / "fig10_k" / "results", models, pairs)
            start = time.perf_counter()
            index = build_site(storage.on_disk(root / "fig10_k"), root / "site")
            build = time.perf_counter() - start
            site_mb = sum(f.stat().st_size for f in index.parent.rglob("*") if f.is_file()) / 2**20
            page = index.parent / sweep_page_name("fig10_k")
            load = load_seconds(page)
            print(f"{name:28s} {len(models):6d} {len(models) * len(pairs):8d} {build:8.2f} {site_mb:8.2f} "
                  f"{page.stat().st_size / 2**20:8.2f} {'-' if load is None else f'{load:.2f}':>7s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
