"""Train one trial of the demo (the tiny Fig. 10) in this process and score it: how the demo's settings
were chosen (docs/results.md, §2c).

The same trial as under Ray Train (one thread, as a 0.98-CPU worker; the suite checks that both train
the same weights), scored teacher-forced on the 1..5 square (ID) and on the diagonal, 100 problems per
cell. Prints one JSON line: the overrides, training seconds, final loss, ID and the diagonal's rates.

    python benchmarks/demo_settings.py --k 12 --seed 1 --set train.global_batch=64 --set train.micro_batch=64
    ATEN_CPU_CAPABILITY=default python benchmarks/demo_settings.py --k 12 --seed 1   # another CPU's float sums
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from abacus_ray.evaluation.engine import run_cells
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.runner import prepare
from abacus_ray.figures.fig10_k import SWEEP
from abacus_ray.training.loop import train

PER_CELL = 100


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, required=True, help="model.max_k, the Abacus offset")
    p.add_argument("--seed", type=int, default=0, help="the training seed")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more config overrides")
    args = p.parse_args()
    torch.set_num_threads(1)
    overrides = dict(item.split("=", 1) for item in args.set) | {"seed": args.seed}
    cfg = SWEEP.expand("tiny", seeds=1, overrides=overrides, axes={"model.max_k": [args.k]})[0].config
    t0 = time.perf_counter()
    result = train(cfg)
    seconds = time.perf_counter() - t0

    def rate(cells: list[Cell]) -> float:
        out = run_cells(result.model, prepare(cfg, cells, PER_CELL, 0), engine="teacher")
        return round(sum(o.n_correct for o in out) / sum(o.n for o in out), 4)

    n = cfg.task.train_max_len
    print(json.dumps({"k": args.k, "seed": args.seed, "set": args.set, "train_s": round(seconds),
                      "loss": round(result.metrics["loss"], 4),
                      "id": rate([Cell("add", i, j) for i in range(1, n + 1) for j in range(1, n + 1)]),
                      "diagonal": {d: rate([Cell("add", d, d)]) for d in range(n + 1, 19)}}))


if __name__ == "__main__":
    main()
