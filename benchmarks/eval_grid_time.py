"""Wall time of scoring a named grid with the exact-match engine, unit by unit, on one device.

    python benchmarks/eval_grid_time.py [CHECKPOINT] [--preset tiny] [--grid NAME] [--every 1]
        [--device cuda] [--engine teacher] [--profile]

Loads the checkpoint once (without one: a randomly initialised model of `--preset`, which times the
same), warms up on one cell, then scores every `--every`-th cell of the grid (a
spread sample when > 1; 1 = the whole grid) in the work units `abacus-ray eval` uses, synchronising
the device after each. Prints per-unit rows, then the total: cells, problems, teacher-forced tokens,
seconds, tokens/s, forward TFLOP/s (`flops_per_token` with no gradient) and, for a sample, the whole
grid's time extrapolated by token count. `--profile` prints the top device kernels of one unit.
The engine's cost does not depend on accuracy, so an untrained model times the same as a trained one.
The grid defaults to the model's first `eval.grids` entry (tiny: `tiny-addition`).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from abacus_ray import storage  # noqa: E402
from abacus_ray.config import preset  # noqa: E402
from abacus_ray.config.evaluation import EvalConfig  # noqa: E402
from abacus_ray.evaluation.grids import resolve_grid  # noqa: E402
from abacus_ray.evaluation.runner import score_cells  # noqa: E402
from abacus_ray.evaluation.work import cell_cost, cells_for, unit_tokens, work_units  # noqa: E402
from abacus_ray.model import ArithmeticTransformer  # noqa: E402
from abacus_ray.model.checkpoint import Checkpoint, load_checkpoint  # noqa: E402


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", nargs="?", help="checkpoint directory (default: a random model of --preset)")
    p.add_argument("--preset", default="tiny", help="model preset when no checkpoint is given (default tiny)")
    p.add_argument("--grid", default=None, help="named grid (default: the model's first eval.grids entry)")
    p.add_argument("--every", type=int, default=1, help="score every K-th cell (default 1: the whole grid)")
    p.add_argument("--per-cell", type=int, default=100)
    p.add_argument("--engine", default="teacher", choices=("teacher", "kv", "naive"))
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--profile", action="store_true", help="torch.profiler table of the first timed unit")
    args = p.parse_args()
    device = torch.device(args.device)
    t0 = time.perf_counter()
    if args.checkpoint:
        ckpt = load_checkpoint(storage.resolve(args.checkpoint, flag="CHECKPOINT"), map_location=device)
    else:
        torch.manual_seed(0)
        cfg = preset(args.preset)
        model = ArithmeticTransformer.for_experiment(cfg).to(device).eval()
        ckpt = Checkpoint(Path(f"random-{args.preset}"), model, cfg, f"random-{args.preset}", {}, device)
    grid = args.grid or ckpt.config.eval.grids[0]
    load_s = time.perf_counter() - t0
    eval_cfg = EvalConfig(per_cell=args.per_cell, engine=args.engine)
    cells = cells_for(ckpt.config, [resolve_grid(grid=grid)])
    cells.sort(key=lambda c: (c.task, cell_cost(c, args.per_cell)))  # as `evaluate` orders them
    sample = cells[::args.every]
    t0 = time.perf_counter()
    score_cells(ckpt, sample[:1], eval_cfg)
    sync(device)
    warm_s = time.perf_counter() - t0
    m = ckpt.config.model
    print(f"# {grid} every {args.every}: {len(sample)} of {len(cells)} cells, {args.engine}, {device} "
          f"({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), model {m.layers}x"
          f"{m.recurrences} hidden {m.hidden}; load {load_s:.1f} s, warm-up cell {warm_s:.1f} s")
    activities = [torch.profiler.ProfilerActivity.CPU] + (
        [torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [])
    print(f"{'unit':>4} {'cells':>5} {'tokens':>10} {'seconds':>8} {'tokens/s':>10}")
    total_s, total_tokens, total_flops = 0.0, 0.0, 0.0
    for u, unit in enumerate(work_units(sample, args.per_cell, unit_tokens(eval_cfg, device.type), 200)):
        tokens = sum(cell_cost(c, args.per_cell) for c in unit)
        profile = args.profile and u == 0
        with torch.profiler.profile(activities=activities) if profile else contextlib.nullcontext() as prof:
            t0 = time.perf_counter()
            score_cells(ckpt, unit, eval_cfg)
            sync(device)
            dt = time.perf_counter() - t0
        if profile:
            key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
            print(prof.key_averages().table(sort_by=key, row_limit=15), flush=True)
        total_s += dt
        total_tokens += tokens
        seq = int(max(cell_cost(c, 1) for c in unit))  # one problem's line: the unit's longest sequence
        total_flops += tokens * ckpt.model.flops_per_token(seq, m.test_recurrences, grad_recurrences=0)
        print(f"{u:>4} {len(unit):>5} {tokens:>10,.0f} {dt:>8.2f} {tokens / dt:>10,.0f}", flush=True)
    grid_tokens = sum(cell_cost(c, args.per_cell) for c in cells)
    print(f"total: {len(sample)} cells, {total_tokens:,.0f} tokens in {total_s:.1f} s = {total_tokens / total_s:,.0f} "
          f"tokens/s, ~{total_flops / total_s / 1e12:.3g} TFLOP/s forward; whole grid ({grid_tokens:,.0f} tokens) "
          f"~{total_s * grid_tokens / total_tokens / 60:.1f} min + load {load_s:.0f} s")


if __name__ == "__main__":
    main()
