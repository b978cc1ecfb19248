"""`abacus-ray import-official`: turn a checkpoint of the official code into one of ours.

    abacus-ray import-official DIR --out RUN [--task add] [--train-max-len 20] [--name NAME]

DIR is what the official `save_final_model` writes: `model.safetensors` + `model_config.json`
(model/official.py says how each maps). RUN becomes a run directory holding one checkpoint,
`RUN/step-000000000`, laid out as `abacus-ray train` lays out its own, so RUN goes through `eval`,
`eval-all` (which finds it under any results root), `summary` and the dashboard like any model trained
here, named NAME (default `official-<DIR's name>`); `describe RUN` shows where it came from. Anything that does not map is one line naming the key,
exit status 2, and nothing is written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from abacus_ray.cli import check_output_dir
from abacus_ray.config.task import TASKS


def register(subparsers) -> None:
    p = subparsers.add_parser("import-official", help="convert an official mcleish7/arithmetic checkpoint",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory", metavar="DIR", help="official checkpoint directory (model.safetensors, model_config.json)")
    p.add_argument("--out", required=True, metavar="RUN", help="run directory to write (its step-000000000 checkpoint)")
    p.add_argument("--task", choices=TASKS, default=None,
                   help="the task it was trained on; the files do not say (default: add, or sort for the "
                        "sort vocabulary)")
    p.add_argument("--train-max-len", type=int, default=None,
                   help="its training operand length n (ID/OOD regions; default 20, 10 for sorting)")
    p.add_argument("--name", default=None, help="name in results tables and dashboards (default official-<DIR name>)")
    p.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    from abacus_ray.model.checkpoint import checkpoint_name, save_checkpoint
    from abacus_ray.model.official import load_official
    from abacus_ray.model.transformer import ArithmeticTransformer

    if args.train_max_len is not None and args.train_max_len < 1:
        raise ValueError(f"--train-max-len: must be >= 1, got {args.train_max_len}")
    out = check_output_dir(args.out, "--out")
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"--out: {out} exists and is not empty; choose a new run directory")
    cfg, weights, source = load_official(args.directory, task=args.task, train_max_len=args.train_max_len,
                                         name=args.name)
    model = ArithmeticTransformer.for_experiment(cfg)
    model.load_state_dict(weights)  # names and shapes were checked against this very config
    state = {"step": 0, "samples": 0, "tokens": 0, **source.meta()}
    model_id = save_checkpoint(Path(out) / checkpoint_name(0), model, cfg, state)
    m = cfg.model
    print(f"imported {source.official_class} ({m.layers} x {m.recurrences}, {m.positions}, injection "
          f"{m.injection}, task {cfg.task.name}) from {source.path} as {cfg.name} into {out} "
          f"(model_id {model_id[:12]})")
    return 0
