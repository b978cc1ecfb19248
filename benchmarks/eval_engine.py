"""Problems/s of the three exact-match engines on the same cells (teacher-forced, KV-cache, naive).

    python benchmarks/eval_engine.py [--digits 20 50 100] [--models tiny mid] [--threads 2] [--device cpu]

For each model and each n-digit addition cell (n x n), every engine scores the same problems with the
same per-cell noise; the script checks that their per-problem verdicts agree and prints a table of
seconds, problems/s and the speed-up over the naive loop (the official decoder: a full forward per
generated token). Models are random (untrained), so decoders never stop early at EOS and run the whole
answer field + 2 spare tokens, close to the official fixed-length loop.

Models: `tiny` = the tiny preset (2 layers x 128 hidden, 4 heads), `mid` = 4 layers x 256 hidden
(1024 intermediate, 8 heads). Problems per cell shrink with length so the naive loop stays in minutes
on 2 CPU cores; teacher-forced and KV get the same count (no advantage from bigger batches).
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from abacus_ray.evaluation.engine import prepare_cell, run_cells
from abacus_ray.evaluation.grids import Cell
from abacus_ray.model import ArithmeticTransformer, ModelConfig
from abacus_ray.tasks.evalsets import eval_problems
from abacus_ray.tasks.tokenizer import get_tokenizer

MODELS = {
    "tiny": dict(layers=2, recurrences=1, hidden=128, intermediate=512, heads=4),
    "mid": dict(layers=4, recurrences=1, hidden=256, intermediate=1024, heads=8),
}
PROBLEMS = {20: 50, 50: 20, 100: 10}


def bench(model, cell, engine: str, budget: int) -> tuple[float, list]:
    start = time.perf_counter()
    out = run_cells(model, [cell], engine=engine, token_budget=budget)
    return time.perf_counter() - start, out[0].correct


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--digits", type=int, nargs="+", default=[20, 50, 100])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--problems", type=int, default=None, help="problems per cell (default: 50/20/10 by length)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: on a shared machine, 2+ threads stall per-token steps)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--budget", type=int, default=1 << 16, help="token budget (one batch per cell)")
    ap.add_argument("--grid", default="tiny-addition",
                    help="also time a whole named grid (100 problems/cell) with packing; '' to skip")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    tok = get_tokenizer("pad")
    print(f"# torch {torch.__version__}, {platform.processor() or platform.machine()}, device {device}, "
          f"threads {torch.get_num_threads()}")
    header = (f"{'model':>5} {'params':>8} {'digits':>6} {'problems':>8} {'engine':>8} {'seconds':>9} "
              f"{'problems/s':>11} {'vs naive':>9}")
    print(header)
    print("-" * len(header))
    for name in args.models:
        torch.manual_seed(0)
        cfg = ModelConfig(**MODELS[name], max_k=100, abacus_table=256)
        model = ArithmeticTransformer(cfg, tok.vocab_size).to(device).eval()
        params = sum(p.numel() for p in model.parameters())
        for n in args.digits:
            count = args.problems or PROBLEMS.get(n, 10)
            cell = prepare_cell(Cell("add", n, n), eval_problems("add", n, n, count, 0), tok, 0)
            bench(model, cell, "teacher", args.budget)  # warm-up (allocator, thread pool)
            results = {}
            for engine in ("naive", "kv", "teacher"):
                results[engine] = bench(model, cell, engine, args.budget)
            verdicts = {e: r[1] for e, r in results.items()}
            assert verdicts["teacher"] == verdicts["kv"] == verdicts["naive"], "engines disagree"
            base = results["naive"][0]
            for engine in ("teacher", "kv", "naive"):
                sec = results[engine][0]
                print(f"{name:>5} {params / 1e6:>7.2f}M {n:>6} {count:>8} {engine:>8} {sec:>9.3f} "
                      f"{count / sec:>11.1f} {base / sec:>8.1f}x", flush=True)
    if args.grid:
        grid_throughput(args.grid, args.models, device)


def grid_throughput(grid_name: str, models: list[str], device: torch.device) -> None:
    """Whole-grid cells/s: teacher-forced packs many cells per batch (default CPU budget), KV groups rows
    by prompt length. The naive loop is left out (minutes)."""
    from abacus_ray.evaluation.grids import get_grid

    grid = get_grid(grid_name)
    tok = get_tokenizer("pad")
    cells = [prepare_cell(c, eval_problems(c.task, c.i, c.j, 100, 0), tok, 0) for c in grid.cells(grid.task)]
    print(f"\n# whole grid {grid_name}: {len(cells)} cells x 100 problems")
    print(f"{'model':>5} {'engine':>8} {'seconds':>9} {'cells/s':>9} {'problems/s':>11}")
    for name in models:
        torch.manual_seed(0)
        cfg = ModelConfig(**MODELS[name], max_k=100, abacus_table=256)
        model = ArithmeticTransformer(cfg, tok.vocab_size).to(device).eval()
        verdicts = {}
        for engine in ("teacher", "kv"):
            start = time.perf_counter()
            out = run_cells(model, cells, engine=engine)
            sec = time.perf_counter() - start
            verdicts[engine] = [o.correct for o in out]
            print(f"{name:>5} {engine:>8} {sec:>9.2f} {len(cells) / sec:>9.1f} {100 * len(cells) / sec:>11.0f}",
                  flush=True)
        assert verdicts["teacher"] == verdicts["kv"], "engines disagree"


if __name__ == "__main__":
    main()
