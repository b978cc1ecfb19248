"""Soak: tiny Fig. 10 sweeps (train through Tune + Train, Ray Data evaluation, dashboard) back to back
for a fixed time in one long-lived driver with one embedded Ray. Memory, open files and Ray processes
must stay flat; leaks show as a trend over the rounds. Not part of CI.

    python benchmarks/soak.py [--minutes 30] [--trials 2] [--steps 40] [--out soak.csv]

Each round writes into a fresh storage directory and deletes it afterwards, so disk use is bounded;
the census (psutil over this process and everything below it: Ray's daemons, workers, actors) is
taken after each round, once Ray has had a moment to reap finished workers.
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.census import census  # noqa: E402


def trend(values: list[float]) -> tuple[float, float, float]:
    """Medians of the first and last quarter of rounds 2.. and the Theil-Sen slope per round (the median
    of all pairwise slopes). Round 1 warms caches up; medians ignore a round whose census caught a
    worker that was still exiting."""
    body = values[1:] or values
    q = max(1, len(body) // 4)
    pairs = [(body[j] - body[i]) / (j - i) for i in range(len(body)) for j in range(i + 1, len(body))]
    return statistics.median(body[:q]), statistics.median(body[-q:]), statistics.median(pairs) if pairs else 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0, help="how long to keep starting rounds")
    p.add_argument("--trials", type=int, default=2, help="trials per sweep round (tiny Fig. 10 k values)")
    p.add_argument("--steps", type=int, default=40, help="training steps per trial")
    p.add_argument("--settle-s", type=float, default=3.0, help="pause before each census")
    p.add_argument("--out", default=None, help="write the per-round census as CSV here")
    args = p.parse_args()

    from abacus_ray import storage
    from abacus_ray.api.sweeps import load_sweep
    from abacus_ray.cli.sweep import main as sweep_main
    from abacus_ray.cluster import runtime

    sweep = load_sweep("fig10_k")
    scratch = Path(tempfile.mkdtemp(prefix="soak-"))
    runtime.init()
    rows, censuses = [], []
    start = time.monotonic()
    baseline = census()
    print(f"start: {baseline.processes} processes ({baseline.ray_processes} Ray), {baseline.rss_mb:.0f} MB RSS, "
          f"{baseline.open_files} open files")
    print(f"{'round':>5} {'min':>6} {'round s':>8} {'procs':>6} {'ray':>5} {'RSS MB':>8} {'files':>6}")
    while time.monotonic() - start < args.minutes * 60:
        n = len(rows) + 1
        place = scratch / f"round-{n}"
        t = time.monotonic()
        code = sweep_main(sweep, ["--preset", "tiny", "--storage", str(place), "--max-trials", str(args.trials),
                                  "--set", f"train.max_steps={args.steps}", "--set", "train.budget_hours=100",
                                  "--set", "eval.per_cell=4", "--grid", "cells:1-6x1-6"])
        if code != 0:
            print(f"round {n}: sweep exited with {code}", file=sys.stderr)
            return 1
        seconds = time.monotonic() - t
        shutil.rmtree(place, ignore_errors=True)
        time.sleep(args.settle_s)
        c = census()
        censuses.append(c)
        rows.append({"round": n, "minutes": (time.monotonic() - start) / 60, "round_s": seconds,
                     "processes": c.processes, "ray_processes": c.ray_processes, "rss_mb": c.rss_mb,
                     "open_files": c.open_files})
        r = rows[-1]
        print(f"{n:5d} {r['minutes']:6.1f} {seconds:8.1f} {c.processes:6d} {c.ray_processes:5d} {c.rss_mb:8.0f} "
              f"{c.open_files:6d}", flush=True)
    runtime.shutdown()
    shutil.rmtree(scratch, ignore_errors=True)
    if args.out:
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        storage.write_text(storage.resolve(args.out), text.getvalue())
    print(f"\n{len(rows)} rounds in {(time.monotonic() - start) / 60:.1f} min; median of the first vs the last "
          "quarter of rounds 2.., and the trend:")
    for key, unit in (("rss_mb", "MB RSS"), ("open_files", "open files"), ("processes", "processes"),
                      ("ray_processes", "Ray processes"), ("round_s", "s per round")):
        first, last, slope = trend([row[key] for row in rows])
        change = 100 * (last / first - 1) if first else 0.0
        print(f"  {unit:<14} {first:9.1f} -> {last:9.1f}  ({change:+.1f} %, {slope:+.2f} per round)")
    if len(censuses) > 2:
        print(f"memory growth by process, round 2 -> round {len(censuses)}:")
        for title, delta in censuses[-1].growth(censuses[1]):
            print(f"  {delta:+8.1f} MB  {title}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
