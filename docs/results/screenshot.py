"""Screenshots of a built dashboard page for docs/results.md (headless Debian Chromium via Playwright).

    python docs/results/screenshot.py PAGE.html OUT.png [--mean] [--select ID=VALUE ...] [--width 1300]
        [--clip-height 1900]

Opens the static page from disk (no server, nothing leaves the machine), waits until every plot is
drawn, optionally switches to the seed-mean view and sets selectors, and saves a PNG. The shot is
retaken at a smaller viewport until it is under `--max-kb` (300 KB by default).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def shoot(page_path: Path, out: Path, *, mean: bool, selects: list[tuple[str, str]], width: int,
          height: int, max_kb: int, clip_height: int | None = None) -> int:
    """Save the screenshot; returns its size in bytes."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
                                                   viewport={"width": width, "height": height})
        try:
            page = ctx.new_page()
            page.goto(page_path.resolve().as_uri())
            if page.query_selector("#dashboard-data"):
                page.wait_for_selector("body[data-rendered='1']", timeout=30_000)
            if mean and page.query_selector("#sel-mode"):
                page.select_option("#sel-mode", "mean")
            for sel, value in selects:
                page.select_option(f"#{sel}", value)
            page.wait_for_timeout(1500)  # let plotly finish redrawing
            scale = 1.0
            while True:
                clip = None if clip_height is None else {"x": 0, "y": 0, "width": page.viewport_size["width"],
                                                          "height": clip_height * scale}
                page.screenshot(path=str(out), full_page=True, type="png", scale="css", clip=clip)
                size = out.stat().st_size
                if size <= max_kb * 1024 or scale < 0.5:
                    return size
                scale *= 0.85
                page.set_viewport_size({"width": int(width * scale), "height": int(height * scale)})
                page.wait_for_timeout(1000)
        finally:
            ctx.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("page", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--mean", action="store_true", help="show the mean over seeds")
    p.add_argument("--select", action="append", default=[], metavar="ID=VALUE", help="set a <select> by element id")
    p.add_argument("--width", type=int, default=1300)
    p.add_argument("--height", type=int, default=900)
    p.add_argument("--max-kb", type=int, default=300)
    p.add_argument("--clip-height", type=int, default=None, help="keep only the top N CSS pixels of the page")
    args = p.parse_args(argv)
    if not args.page.is_file():
        print(f"screenshot: error: PAGE: {args.page} is not a file", file=sys.stderr)
        return 2
    selects = [tuple(s.split("=", 1)) for s in args.select]
    size = shoot(args.page, args.out, mean=args.mean, selects=selects, width=args.width, height=args.height,
                 max_kb=args.max_kb, clip_height=args.clip_height)
    print(f"{args.out}: {size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
