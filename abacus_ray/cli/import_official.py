"""`abacus-ray import-official`: turn a checkpoint of the official code into one of ours.

    abacus-ray import-official DIR --out RUN [--task add] [--train-max-len 20] [--name NAME]

DIR is what the official `save_final_model` writes: `model.safetensors` + `model_config.json`
(model/official.py says how each maps), a local directory. RUN becomes a run directory holding one
checkpoint, `RUN/step-000000000`, laid out as `abacus-ray train` lays out its own (RUN may be an
object-store URI: the checkpoint is written here, then copied up), so RUN goes through `eval`,
`eval-all` (which finds it under any results root), `summary` and the dashboard like any model
trained here, named NAME (default `official-<DIR's name>`); `describe RUN` shows where it came from.
Anything that does not map is one line naming the file and its key, exit status 2, and nothing is
written.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from abacus_ray import storage
from abacus_ray.config.dicts import check_text
from abacus_ray.config.task import TASKS


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "import-official",
        help="convert an official mcleish7/arithmetic checkpoint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory", metavar="DIR",
                   help="the official checkpoint directory (model.safetensors, "
                        "model_config.json): a path or file:// (read on this machine; other URIs "
                        "are refused)")
    p.add_argument("--out", required=True, metavar="RUN",
                   help="the run directory to write (its one checkpoint RUN/step-000000000): a "
                        "path or an object-store URI (written here, then copied up)")
    p.add_argument("--task", choices=TASKS, default=None,
                   help=f"the task it was trained on, one of {', '.join(TASKS)}; the files do "
                        "not say (default: add, or sort for the sort vocabulary)")
    p.add_argument("--train-max-len", type=int, default=None,
                   help="its training operand length n, for the ID/OOD regions (default: 20, or "
                        "10 for sorting)")
    p.add_argument("--name", default=None,
                   help="its name in tables and dashboards; one line of printable characters "
                        "(default: official-(DIR's name))")
    p.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    # heavy: torch (these model modules load it), with the command, not at `abacus-ray --help`
    from abacus_ray.model.checkpoint import META_FILE, checkpoint_name, save_checkpoint
    from abacus_ray.model.official_files import load_official
    from abacus_ray.model.transformer import ArithmeticTransformer

    if args.train_max_len is not None and args.train_max_len < 1:
        raise ValueError(f"--train-max-len: must be >= 1, got {args.train_max_len}")
    if args.name is not None:
        check_text(args.name, "--name")
    source_dir = storage.local_path(args.directory, "DIR", "an official checkpoint")
    # a path or URI, refused in one line before anything is read
    out = storage.probe(args.out, "--out")
    if storage.listdir(out):
        raise ValueError(f"--out: {out} exists and is not empty; choose a new run directory")
    cfg, weights, source = load_official(
        source_dir, task=args.task, train_max_len=args.train_max_len, name=args.name
    )
    model = ArithmeticTransformer.for_experiment(cfg)
    model.load_state_dict(weights)  # names and shapes were checked against this very config
    state = {"step": 0, "samples": 0, "tokens": 0, **source.meta()}
    if out.local:  # the run appears whole, or not at all if another import made it meanwhile
        ids = []

        def fill(run: Path) -> None:
            ids.append(save_checkpoint(storage.on_disk(run / checkpoint_name(0)), model, cfg,
                                       state))

        storage.create_dir(out, fill, "--out")
        model_id = ids[0]
    # written here, then copied up, meta.json last (a reader lists only checkpoints that have it)
    else:
        with tempfile.TemporaryDirectory(prefix="abacus-import-") as tmp:
            staged = Path(tmp) / checkpoint_name(0)
            model_id = save_checkpoint(storage.on_disk(staged), model, cfg, state)
            storage.upload(staged, out / checkpoint_name(0), last=META_FILE)
    m = cfg.model
    print(f"imported {source.official_class} ({m.layers} x {m.recurrences}, {m.positions}, "
          f"injection {m.injection}, task {cfg.task.name}) from {source.path} as {cfg.name} into "
          f"{out} (model_id {model_id[:12]})")
    return 0
