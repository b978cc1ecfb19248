"""How many exact-match verdicts change between numeric precisions, per cell and overall.

    python benchmarks/precision_verdicts.py CHECKPOINT [--grid tiny-addition] [--precisions fp32 bf16 tf32]
                                            [--per-cell 100] [--device cpu] [--csv out.csv]

The official evaluation runs fp32 (docs/official-code.md §7.1); `eval.precision=auto` runs bf16 autocast
on CUDA. Every precision scores the same problems with the same per-cell noise (the teacher-forced
engine, whose verdicts equal greedy decoding's); the first precision is the reference. A verdict
changes when one problem is right under one precision and wrong under the other, so changes in
both directions count (a cell's accuracy can stay equal while two verdicts flip). The rule the
evaluation default follows (docs/fidelity.md): a fast precision may stay the default only if it
changes <= 0.1 % of verdicts and no cell by more than one problem.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys

import torch

from abacus_ray import storage
from abacus_ray.config.train import PRECISIONS, resolved_precision
from abacus_ray.evaluation.engine import run_cells
from abacus_ray.evaluation.grids import resolve_grid_names
from abacus_ray.evaluation.runner import prepare
from abacus_ray.evaluation.work import cells_for
from abacus_ray.model.checkpoint import load_checkpoint


def verdicts(model, prepared, precision: str) -> dict[tuple[int, int], list[bool]]:
    outcomes = run_cells(model, prepared, engine="teacher", precision=precision)
    return {(o.cell.i, o.cell.j): o.correct for o in outcomes}


def compare(reference: dict, other: dict) -> list[dict]:
    """Per cell: problems, right under each, and verdicts that differ."""
    rows = []
    for cell, ref in reference.items():
        got = other[cell]
        rows.append({"i": cell[0], "j": cell[1], "n": len(ref), "right_ref": sum(ref), "right": sum(got),
                     "changed": sum(a != b for a, b in zip(ref, got, strict=True))})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", help="checkpoint directory, or a run directory (its latest checkpoint)")
    p.add_argument("--grid", default="tiny-addition", help="grid name or spec (default tiny-addition)")
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16", "tf32"], choices=PRECISIONS,
                   help="the first is the reference (default: fp32 bf16 tf32)")
    p.add_argument("--per-cell", type=int, default=100, help="problems per cell (default 100)")
    p.add_argument("--seed", type=int, default=0, help="eval seed (default 0)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--csv", default=None, help="also write the per-cell comparison here")
    args = p.parse_args(argv)

    device = torch.device(args.device)
    ckpt = load_checkpoint(storage.resolve(args.checkpoint, flag="CHECKPOINT"), map_location=device)
    cells = cells_for(ckpt.config, resolve_grid_names([args.grid]))
    prepared = prepare(ckpt.config, cells, args.per_cell, args.seed)
    resolved = {name: resolved_precision(name, device.type, evaluation=True) for name in args.precisions}
    ref_name = args.precisions[0]
    reference = verdicts(ckpt.model, prepared, ref_name)
    total = sum(len(v) for v in reference.values())
    print(f"{ckpt.model_id[:12]} on {args.grid}: {len(cells)} cells, {total} problems, device {device.type}; "
          f"reference {ref_name} ({sum(map(sum, reference.values()))} right)")
    out_rows = []
    for name in args.precisions[1:]:
        if resolved[name] == resolved[ref_name]:
            print(f"{name}: runs as {resolved[name]} on {device.type}, the reference itself; skipped")
            continue
        rows = compare(reference, verdicts(ckpt.model, prepared, name))
        changed = sum(r["changed"] for r in rows)
        worst = max(rows, key=lambda r: r["changed"])
        print(f"{name}: {changed} of {total} verdicts changed ({100 * changed / total:.3f} %), "
              f"{sum(r['changed'] > 0 for r in rows)} of {len(rows)} cells touched, worst cell "
              f"{worst['i']}x{worst['j']}: {worst['changed']} problems ({worst['right_ref']} -> {worst['right']} right); "
              f"right overall {sum(r['right_ref'] for r in rows)} -> {sum(r['right'] for r in rows)}; "
              f"default rule (<= 0.1 %, no cell > 1): {'met' if changed <= total / 1000 and worst['changed'] <= 1 else 'NOT met'}")
        out_rows += [{"precision": name, **r} for r in rows]
    if args.csv and out_rows:
        text = io.StringIO()
        w = csv.DictWriter(text, fieldnames=list(out_rows[0]))
        w.writeheader()
        w.writerows(out_rows)
        storage.write_text(storage.resolve(args.csv), text.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
