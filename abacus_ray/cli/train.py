"""`abacus-ray train`: train one model on this machine until its budget is spent.

Checkpoints go to `--out DIR` as numbered directories `DIR/step-NNNNNNNNN/` (the newest two are
kept; the highest is the latest). `--resume` continues from DIR's latest checkpoint with the config
stored there (plus any `--set` overrides, e.g. a longer `train.max_steps`); without it, DIR must not
hold checkpoints yet. A progress line (samples/s, loss, budget spent, ETA) goes to stderr: updated in
place on a terminal, one line per report otherwise. The final checkpoint path and model id go to
stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from abacus_ray.cli import CLIError, add_config_args, check_device, check_output_dir, config_from_args


def register(subparsers) -> None:
    p = subparsers.add_parser("train", help="train a model (budgeted, checkpointed, resumable)", description=__doc__)
    add_config_args(p)
    p.add_argument("--out", required=True, metavar="DIR", help="checkpoint directory (step-* subdirectories)")
    p.add_argument("--resume", action="store_true",
                   help="continue from DIR's latest checkpoint and its stored config (--set still applies)")
    p.add_argument("--device", default="auto", help="auto (cuda if available, else cpu), cpu, cuda or cuda:N")
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
    parts = [f"step {m['step']:,}", f"{m['samples']:,} samples", f"{m['samples_per_s']:,.0f} samples/s",
             f"loss {m['loss']:.4f}", f"lr {m['lr']:.2e}", f"batch {m['batch_size']}",
             f"budget {100 * min(m['budget_fraction'], 1.0):.1f}% ({m['device_hours']:.4f} device-h)",
             f"ETA {_clock(m['eta_s'])}"]
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


def budget_limits(p: dict) -> list[str]:
    """A budget plan (`training.budget.plan`) in words, e.g. ["24 A4000-h = 5.6e7 samples", "1000 device-h"]."""
    out = []
    if p["a4000_hours"] is not None:
        out.append(f"{p['a4000_hours']:g} A4000-h = {p['model_flops']:.3g} model FLOPs = {p['samples']:,} samples")
    elif p["samples"] is not None:
        out.append(f"{p['samples']:,} samples")
    if p["optimizer_steps"] is not None:
        out.append(f"{p['optimizer_steps']:,} steps")
    if p["device_hours"] is not None:
        out.append(f"{p['device_hours']:g} device-h = {p['wall_hours']:g} wall-h on {p['workers']} device(s)")
    return out


def handler(args: argparse.Namespace) -> int:
    from abacus_ray.model.checkpoint import (
        STATE_FILE,
        check_train_state,
        latest_checkpoint,
        load_checkpoint,
    )
    from abacus_ray.training.budget import plan
    from abacus_ray.training.loop import train

    out = check_output_dir(args.out, "--out")  # before any training: a checkpoint must be writable
    latest = latest_checkpoint(out)
    if args.resume:
        if latest is None:
            raise CLIError(f"--resume: no checkpoint under {out}")
        # Every file of the checkpoint is checked before anything is printed or trained: weights-only,
        # hash and shapes (`load_checkpoint`), and a training state that holds what resuming reads.
        resumed = load_checkpoint(latest)
        check_train_state(resumed.state, latest / STATE_FILE)
        cfg = resumed.config.with_overrides(args.overrides)
        del resumed
    else:
        if latest is not None:
            raise CLIError(f"--out: {out} already holds checkpoints (latest {latest.name}); pass --resume to "
                           "continue it or choose another directory")
        cfg = config_from_args(args)
    device = check_device(args.device)
    m, t = cfg.model, cfg.task
    limits = budget_limits(plan(cfg))
    print(f"training {cfg.name}: {t.name} size {t.train_max_len}, {m.layers}x{m.recurrences} {m.positions}, "
          f"on {device}; budget {'; '.join(limits)}"
          + (f"; resuming {latest}" if args.resume else ""), file=sys.stderr, flush=True)
    result = train(cfg, device, report=ProgressLine(sys.stderr), checkpoint_dir=out,
                   resume_from=latest if args.resume else None)
    print(f"checkpoint: {result.checkpoint}")
    print(f"model_id: {result.model_id}")
    return 0
