"""`abacus-ray eval`: score checkpoints on operand-length grids into a Parquet results directory.

    abacus-ray eval CHECKPOINT... --out RESULTS
        [--grid NAME | --cells 1-20x1-20 | --diagonal 101-160]
        [--per-cell N] [--seed S] [--samples] [--engine teacher|kv|naive] [--recurrences R]
    abacus-ray eval CHECKPOINT --out RESULTS --problems FILE [--seed S]
        [--engine E] [--recurrences R]

A rerun into the same RESULTS scores only the cells that are missing, so an interrupted run is
resumed by running the same command again. Without a grid option the grids named in the first
checkpoint's `eval.grids` are used; unset options also default to that checkpoint's `eval.*`.
"""

from __future__ import annotations

import argparse

from abacus_ray.cli import add_plugin_flag, add_threads_flag
from abacus_ray.config.evaluation import ENGINES, HINT_SCORINGS
from abacus_ray.config.train import PRECISIONS
from abacus_ray.evaluation.grids import GRIDS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "eval",
        help="score checkpoints on (i, j) grids by exact match into Parquet",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT",
                   help="checkpoint directories, or run directories (their latest step-* "
                        "checkpoint): paths or URIs")
    p.add_argument("--out", required=True, metavar="RESULTS",
                   help="results directory (created if missing): a path or an object-store URI "
                        "(s3://BUCKET/PREFIX, gs://BUCKET/PREFIX)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--grid",
                   help=f"a named grid: {', '.join(GRIDS)}; at most one of --grid, --cells, "
                        "--diagonal, --problems (default: the first checkpoint's eval.grids)")
    g.add_argument("--cells", help="rectangle(s) ROWSxCOLS, e.g. 1-20x1-20 or 1-20x1-20+30x30")
    g.add_argument("--diagonal", help="i = j lengths, e.g. 101-160, 200-1000:100 or 13,15,20")
    g.add_argument("--problems", metavar="FILE",
                   help="score one checkpoint on a file of problems, one a line in natural digit "
                        "order and the task's syntax (123+4567, 12*34, ...): a row per problem in "
                        "RESULTS/problems, plus cell rows. ASCII digits only; spaces around an "
                        "operator, a comma or = are ignored, a space inside a number (1 2+3) is "
                        "refused. A path or file:// (read on this machine)")
    p.add_argument("--per-cell", type=int, default=None,
                   help="problems per cell (default: the first checkpoint's eval.per_cell)")
    p.add_argument("--seed", type=int, default=None,
                   help="evaluation seed: problems and noise per cell (default: the first "
                        "checkpoint's eval.seed)")
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="teacher (one batched forward per cell), kv (KV-cache greedy decoding) "
                        "or naive (the official decoding loop, an oracle for the other two) "
                        "(default: the first checkpoint's eval.engine)")
    p.add_argument("--recurrences", type=int, default=None,
                   help="test-time recurrences (default: the first checkpoint's "
                        "eval.recurrences; where that is unset, the model's)")
    p.add_argument("--samples", action="store_true",
                   help="also write per-problem rows (prompt, target, prediction) to "
                        "RESULTS/samples; the predictions come from KV-cache greedy decoding")
    p.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="auto (fp32, the official evaluation's), fp32, tf32 (fp32 with TF32 "
                        "matrix products; CUDA only, fp32 elsewhere), bf16 (autocast: faster on "
                        "CUDA, changes about 0.1 %% of verdicts, docs/fidelity.md), fp16 "
                        "(autocast), bf16-pure (the whole forward in bf16, weights and residual "
                        "stream included) (default: the first checkpoint's eval.precision)")
    p.add_argument("--token-budget", type=int, default=None,
                   help="tokens per batch (rows x padded length); 0: sized to the device "
                        "(default: the first checkpoint's eval.token_budget)")
    p.add_argument("--sort-require-eos", action="store_true", default=None,
                   help="sorting: also require the EOS (the official metric ignores it) "
                        "(default: the first checkpoint's eval.sort_require_eos)")
    p.add_argument("--hint-scoring", choices=HINT_SCORINGS, default=None,
                   help="index-hint models: official (digits only, hints dropped, as the "
                        "official evaluation) or strict (every hint symbol must be right too) "
                        "(default: the first checkpoint's eval.hint_scoring)")
    p.add_argument("--device", default=None,
                   help="auto, cpu, cuda or cuda:N (default: CUDA if available, else CPU)")
    add_plugin_flag(p, "a checkpoint whose config names a plugin (plugins) is read only where "
                       "that plugin can be imported")
    add_threads_flag(p)
    p.add_argument("--run-id", default=None, help="a run id stored in every row")
    p.add_argument("--flush-every-s", type=float, default=10.0,
                   help="write a results part at least once in this many seconds: what a "
                        "killed run can lose (default: %(default)s)")
    p.add_argument("--flush-every-cells", type=int, default=200,
                   help="... or once in this many cells, whichever comes first "
                        "(default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    from abacus_ray.api.runs import evaluate, score_problems  # heavy: torch, with the command

    settings = {"per_cell": args.per_cell, "seed": args.seed, "engine": args.engine,
                "recurrences": args.recurrences, "precision": args.precision,
                "token_budget": args.token_budget, "sort_require_eos": args.sort_require_eos,
                "hint_scoring": args.hint_scoring}
    common = dict(settings=settings, device=args.device, run_id=args.run_id, plugins=args.plugins,
                  threads=args.threads)
    if args.problems is not None:
        if len(args.checkpoints) != 1:
            raise ValueError(f"--problems: scores one checkpoint, got {len(args.checkpoints)}")
        found = score_problems(args.checkpoints[0], args.problems, args.out, **common)
        if found.part is None:
            print(f"{args.problems} is already scored on this model in {args.out}")
        else:
            print(f"scored {found.problems} problems of {args.problems}: {found.correct} correct "
                  f"({100 * found.correct / found.problems:.1f} %), rows in {args.out}/problems "
                  f"and cell rows in {args.out}")
        return 0
    report = evaluate(args.checkpoints, args.out, grid=args.grid, cells=args.cells,
                      diagonal=args.diagonal, samples=args.samples, progress=not args.quiet,
                      flush_every_s=args.flush_every_s, flush_every_cells=args.flush_every_cells,
                      **common)
    print(f"evaluated {sum(report.evaluated.values())} cells ({sum(report.skipped.values())} "
          f"already present) of {len(report.evaluated)} model(s) into {args.out} in "
          f"{report.seconds:.1f} s")
    return 0
