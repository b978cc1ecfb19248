"""`abacus-ray train`: train one model on this machine until its budget is spent.

Checkpoints go to `--out DIR` as numbered directories `DIR/step-NNNNNNNNN/` (the newest two are
kept; the highest is the latest). `--resume` continues from DIR's latest checkpoint with the config
stored there (plus any `--set` overrides, e.g. a longer `train.max_steps`); without it, DIR must not
hold checkpoints yet. A progress line (samples/s, loss, budget spent, ETA) goes to stderr: updated
in place on a terminal, one line per report otherwise. The final checkpoint path and model id go to
stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from abacus_ray.cli import add_config_args, add_threads_flag, config_from_args
from abacus_ray.config import ExperimentConfig


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="train a model (budgeted, checkpointed, resumable)", description=__doc__
    )
    add_config_args(p)
    p.add_argument("--out", required=True, metavar="DIR",
                   help="checkpoint directory (DIR/step-NNNNNNNNN/, the newest two kept): a "
                        "path or an object-store URI (s3://, gs://), where checkpoints are "
                        "written locally and copied up")
    p.add_argument("--break-lease", action="store_true",
                   help="take over DIR's lease (.lease, held by a running train) from a run that "
                        "is gone where this machine cannot tell (another host's); a killed run "
                        "of this host is taken over without it, with a line saying so")
    p.add_argument("--resume", action="store_true",
                   help="continue from DIR's latest checkpoint with its stored config (--set "
                        "still applies); without it DIR must hold no checkpoint")
    p.add_argument("--device", default="auto",
                   help="auto (CUDA if available, else CPU), cpu, cuda or cuda:N "
                        "(default: %(default)s)")
    p.add_argument("--config", default=None, metavar="FILE_OR_CHECKPOINT",
                   help="start from this config instead of --preset's: a config.json, or a "
                        "checkpoint's (a sweep trial's, to train that trial again: give its "
                        "meta.json's threads as --threads); --set still applies")
    add_threads_flag(p)
    p.set_defaults(func=handler)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def progress_text(m: dict) -> str:
    """One human line of a training report."""
    parts = [
        f"step {m['step']:,}",
        f"{m['samples']:,} samples",
        f"{m['samples_per_s']:,.0f} samples/s",
        f"loss {m['loss']:.4f}",
        f"lr {m['lr']:.2e}",
        f"batch {m['batch_size']}",
        f"budget {100 * min(m['budget_fraction'], 1.0):.1f}% ({m['device_hours']:.4f} device-h)",
        f"ETA {_clock(m['eta_s'])}",
    ]
    if "mfu" in m:
        parts.append(f"MFU {100 * m['mfu']:.1f}%")
    return " | ".join(parts)


class ProgressLine:
    """Prints reports to `stream`: `\\r`-rewritten on a TTY, one line each otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.width = 0

    def __call__(self, metrics: dict) -> None:
        text = progress_text(metrics)
        if metrics.get("checkpoint"):
            text += f" | saved {Path(metrics['checkpoint']).name}"
        if self.tty:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
            if metrics.get("final"):
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def budget_in_words(p: dict) -> list[str]:
    """A budget's terms (`training.budget.budget_terms`) in words, e.g. ["24 A4000-h = 5.6e7
    samples", "1000 device-h"]."""
    out = []
    if p["a4000_hours"] is not None:
        out.append(f"{p['a4000_hours']:g} A4000-h = {p['model_flops']:.3g} model FLOPs = "
                   f"{p['samples']:,} samples")
    elif p["samples"] is not None:
        out.append(f"{p['samples']:,} samples")
    if p["optimizer_steps"] is not None:
        out.append(f"{p['optimizer_steps']:,} steps")
    if p["device_hours"] is not None:
        out.append(f"{p['device_hours']:g} device-h = {p['wall_hours']:g} wall-h on "
                   f"{p['workers']} device(s)")
    return out


def handler(args: argparse.Namespace) -> int:
    from abacus_ray.api.runs import train  # heavy: torch, with the command, not at --help

    cfg = None if args.resume else config_from_args(args)
    found = train(cfg, args.out, resume=args.resume, device=args.device,
                  overrides=args.overrides if args.resume else (),  # else in cfg already
                  threads=args.threads, report=ProgressLine(sys.stderr),
                  break_lease=args.break_lease, announce=announce)
    if found.diverged_at_step is not None:
        kept = (f"the last checkpoint is {found.checkpoint}" if found.checkpoint is not None
                else "no checkpoint was written before")
        print(f"train: diverged at step {found.diverged_at_step} (its loss or gradient norm was "
              f"not finite); the weights were not updated or saved, {kept}; lower train.lr or "
              "change the config", file=sys.stderr)
        return 1
    print(f"checkpoint: {found.checkpoint}")
    print(f"model_id: {found.model_id}")
    return 0


def announce(cfg: ExperimentConfig, device: str, resumed: str | None) -> None:
    """The line printed once everything is checked, before the first step: what trains, where,
    under which budget."""
    import torch  # loaded by the training API already

    from abacus_ray.training.budget import budget_terms

    m, t = cfg.model, cfg.task
    limits = budget_in_words(budget_terms(cfg))
    on = f"{device}, {torch.get_num_threads()} thread(s)" if device == "cpu" else device
    print(f"training {cfg.name}: {t.name} size {t.train_max_len}, {m.layers}x{m.recurrences} "
          f"{m.positions}, on {on}; budget {'; '.join(limits)}"
          + (f"; resuming {resumed}" if resumed else ""), file=sys.stderr, flush=True)
