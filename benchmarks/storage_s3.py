"""Local storage vs an S3 server on loopback, side by side in one run: `eval-all --grid paper-100plus`
and a tiny sweep, each timed as a whole command (Ray start-up included) on a local directory and on a
bucket of a real S3 server (SeaweedFS `weed mini`, started here on free loopback ports).

    python benchmarks/storage_s3.py [--per-cell 100] [--steps 30] [--repeats 1]

What it measures is the cost of object storage itself: every Parquet part is one PUT, a rerun's
missing-cell check one listing plus one GET per part, checkpoints are copied up by Ray Train and
fetched once per evaluator. The target (docs/performance.md, "Object storage") is S3 <= 1.2x local;
a layout of one object per cell, or of many tiny objects, would miss it. Prints one line per run and
the ratios; the order alternates local / S3 so that a machine growing busier does not favour one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the suite's S3 server fixture: tests/s3server.py

from s3server import s3_server  # noqa: E402

from abacus_ray import storage  # noqa: E402

CLI = [sys.executable, "-m", "abacus_ray.cli"]
TARGET = 1.2


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    got = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if got.returncode:
        raise SystemExit(f"{' '.join(argv[2:])} failed ({got.returncode}):\n{got.stderr[-3000:]}")
    return seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--per-cell", type=int, default=100, help="problems per cell of the 101-160 diagonal (default 100)")
    p.add_argument("--steps", type=int, default=30, help="optimiser steps of the sweep's trial (default 30)")
    p.add_argument("--repeats", type=int, default=1, help="pairs of runs per command (default 1)")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    try:
        times = _run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the models, the local results and Ray's per-run homes
    for what in ("eval-all 100+", "tiny sweep"):
        local, remote = sum(times[(what, "local")]), sum(times[(what, "s3")])
        ratio = remote / local
        verdict = "within" if ratio <= TARGET else "OVER"
        print(f"{what}: local {local:.1f} s, S3 {remote:.1f} s, S3/local = {ratio:.2f} ({verdict} the {TARGET}x target)")
    return 0


def _run(args: argparse.Namespace, work: Path) -> dict[tuple[str, str], list[float]]:
    """One tiny model, then every command on each place, alternating the order per repeat."""
    with s3_server() as s3:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | s3.env()
        env |= {"ABACUS_RAY_HOME": str(work / "home"), "RAY_USAGE_STATS_ENABLED": "0"}
        runs = work / "runs"
        subprocess.run([*CLI, "train", "--preset", "tiny", "--set", "train.max_steps=20", "--out", str(runs / "a")],
                       env=env, cwd=work, check=True, capture_output=True)
        os.environ.update(s3.env())
        storage.upload(runs, storage.resolve(s3.uri("runs")))
        places = {"local": (str(runs), str(work / "local")), "s3": (s3.uri("runs"), s3.uri("store"))}
        sweep = ["sweep", "fig10_k", "--preset", "tiny", "--max-trials", "1", "--seeds", "1",
                 "--set", f"train.max_steps={args.steps}", "--set", "eval.per_cell=20", "--grid", "cells:1-10x1-10",
                 "--no-dashboard"]
        times: dict[tuple[str, str], list[float]] = {}
        for n in range(args.repeats):
            order = ("local", "s3") if n % 2 == 0 else ("s3", "local")
            for where in order:
                src, dst = places[where]
                for what, argv in (("eval-all 100+", ["eval-all", src, "--grid", "paper-100plus", "--per-cell",
                                                       str(args.per_cell), "--out", f"{dst}/ea-{n}"]),
                                   ("tiny sweep", [*sweep, "--storage", f"{dst}/sw-{n}"])):
                    s = timed([*CLI, *argv], env, work)
                    times.setdefault((what, where), []).append(s)
                    print(f"{what:14s} {where:5s} run {n + 1}: {s:6.1f} s", flush=True)
    return times


if __name__ == "__main__":
    sys.exit(main())
