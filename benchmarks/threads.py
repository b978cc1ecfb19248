"""Bare `train` against the same steps inside a sweep, on a quiet machine and beside a busy core.

A sweep's worker trains with the threads of its CPUs (one, at the figures' 0.98 CPU); a bare
`abacus-ray train` takes the CPUs the process may use (affinity, cut to the cgroup quota) unless
`--threads` says otherwise. This times one tiny trial (fig10_k at k = 12, STEPS steps of 64) three
ways, each in its own process: inside a one-trial sweep on the embedded local Ray, bare `train` of
the trial's own config with its default threads, and bare `train --threads 1`; first on a quiet
machine, then with another process spinning on one core. Throughput is the checkpoint's own
`samples / device_hours` (training only: Ray's start-up and the evaluation are not in it), so the
three are the same steps measured the same way; each run starts once no other CPU than the
spinner's is busy (Ray's shutdown after the sweep takes a few seconds). Also prints whether `train --threads 1` gave the
trial's model_id (it should: same config, same thread count).

    python benchmarks/threads.py                 # about 4 minutes on 2 cores
    python benchmarks/threads.py --steps 600
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from abacus_ray import storage

CLI = [sys.executable, "-m", "abacus_ray.cli"]


def run(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(CLI + args, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args[:2])}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")


def meta_of(out: Path) -> dict:
    """The last checkpoint's meta.json under `out`, read through the storage owner."""
    (step,) = sorted(out.glob("**/step-*/meta.json"))[-1:]
    return storage.read_json(storage.on_disk(step))


def rate(meta: dict) -> float:
    return meta["samples"] / (meta["device_hours"] * 3600)


def settle(busy_allowed: int, limit_s: float = 60.0) -> None:
    """Wait (up to `limit_s`) until at most `busy_allowed` CPUs are busy: a run must not start
    while the previous one's processes (Ray's shutdown) still hold a core."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if sum(p > 50.0 for p in psutil.cpu_percent(interval=0.5, percpu=True)) <= busy_allowed:
            return


def measure(tmp: Path, label: str, steps: int, env: dict[str, str],
            busy_allowed: int) -> dict[str, dict]:
    """The trial inside a sweep, then bare `train` of its config at default and one thread."""
    store = tmp / f"{label}-sweep"
    settle(busy_allowed)
    run(["sweep", "fig10_k", "--axis", "model.max_k=12", "--set", f"train.max_steps={steps}",
         "--no-eval", "--no-dashboard", "--tracking", "none", "--storage", str(store)], env)
    config = sorted(store.glob("fig10_k/train/**/step-*/config.json"))[-1]
    metas = {"sweep trial": meta_of(store / "fig10_k" / "train")}
    for name, extra in (("bare train", []), ("bare train --threads 1", ["--threads", "1"])):
        out = tmp / f"{label}-{name.replace(' ', '_')}"
        settle(busy_allowed)
        run(["train", "--config", str(config), "--device", "cpu", "--out", str(out), *extra], env)
        metas[name] = meta_of(out)
    return metas


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="training steps of each run (default 300)")
    args = p.parse_args()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    rows = []
    with tempfile.TemporaryDirectory(prefix="threads-bench-") as tmp:
        for label in ("quiet", "one core busy"):
            spinner = None
            if label != "quiet":
                spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            try:
                metas = measure(Path(tmp), label.replace(" ", "_"), args.steps, env,
                                busy_allowed=0 if spinner is None else 1)
            finally:
                if spinner is not None:
                    spinner.kill()
            trial = metas["sweep trial"]
            for name, meta in metas.items():
                rows.append((label, name, meta["threads"], rate(meta), rate(trial) / rate(meta),
                             meta["model_id"] == trial["model_id"], meta["loss"]))
    print(f"fig10_k, k = 12, {args.steps} steps of 64, {os.cpu_count()} CPUs; throughput = "
          "samples / training seconds (meta.json)")
    print(f"{'machine':<14} {'run':<24} {'threads':>7} {'samples/s':>10} {'time/trial':>10} "
          f"{'same model as trial':>20} {'loss':>8}")
    for label, name, threads, r, ratio, same, loss in rows:
        print(f"{label:<14} {name:<24} {threads:>7} {r:>10.0f} {ratio:>10.2f} {str(same):>20} "
              f"{loss:>8.4f}")


if __name__ == "__main__":
    main()
