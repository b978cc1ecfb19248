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
import tempfile
from pathlib import Path
from typing import TextIO

from abacus_ray import storage
from abacus_ray.cli import (
    CLIError,
    add_config_args,
    add_threads_flag,
    check_device,
    config_from_args,
)
from abacus_ray.config import ExperimentConfig


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="train a model (budgeted, checkpointed, resumable)", description=__doc__
    )
    add_config_args(p)
    p.add_argument("--out", required=True, metavar="DIR",
                   help="checkpoint directory (step-* subdirectories), or an object-store URI "
                        "(s3://, gs://): checkpoints are then written locally and copied up")
    p.add_argument("--break-lease", action="store_true",
                   help="take over DIR's lease from a run that is gone (one this machine cannot "
                        "tell is gone: another host's)")
    p.add_argument("--resume", action="store_true",
                   help="continue from DIR's latest checkpoint and its stored config "
                        "(--set still applies)")
    p.add_argument(
        "--device", default="auto", help="auto (cuda if available, else cpu), cpu, cuda or cuda:N"
    )
    p.add_argument("--config", default=None, metavar="FILE_OR_CHECKPOINT",
                   help="start from this config instead of --preset: a config.json, or a "
                        "checkpoint (a sweep trial's, to train that trial again: give its "
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


class Mirror:
    """`--out` on object storage: each checkpoint the loop saves locally is copied up (the newest
    `KEPT_CHECKPOINTS` are kept there) before the report goes on to `inner`."""

    def __init__(self, inner, loc: storage.Location) -> None:
        self.inner, self.loc = inner, loc

    def copy(self, path) -> None:
        from abacus_ray.model.checkpoint import (  # heavy: torch, with the command
            KEPT_CHECKPOINTS,
            META_FILE,
            list_checkpoints,
        )

        target = self.loc / Path(path).name
        if not storage.exists(target / META_FILE):
            # a reader lists only checkpoints with meta.json
            storage.upload(Path(path), target, last=META_FILE)
        for old in list_checkpoints(self.loc)[: -KEPT_CHECKPOINTS]:
            storage.delete(old)

    def __call__(self, metrics: dict) -> None:
        if metrics.get("checkpoint"):
            self.copy(metrics["checkpoint"])
        self.inner(metrics)


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
    # heavy: torch (checkpoints, budget and loop load it), with the command,
    # not at `abacus-ray --help`
    from abacus_ray.model.checkpoint import (
        STATE_FILE,
        check_train_state,
        latest_checkpoint,
        load_checkpoint,
    )
    from abacus_ray.training.loop import check_fits, check_resumable
    from abacus_ray.training.threads import set_threads

    # a directory or an object-store URI, before any training
    loc = storage.probe(args.out, "--out")
    # On object storage the loop writes into a local staging directory and
    # each checkpoint is copied up.
    out = loc.as_path() if loc.local else Path(tempfile.mkdtemp(prefix="abacus-train-"))
    latest = latest_checkpoint(loc)
    if args.resume:
        if latest is None:
            raise CLIError(f"--resume: no checkpoint under {loc}")
        # Every file of the checkpoint is checked before anything is printed or trained:
        # weights-only, hash and shapes (`load_checkpoint`), and a training state that
        # holds what resuming reads.
        resumed = load_checkpoint(latest)
        check_train_state(resumed.state, latest / STATE_FILE)
        cfg = resumed.config.with_overrides(args.overrides)
        check_resumable(cfg, resumed.config, str(latest), "--resume")  # a --set it cannot take
        del resumed
    else:
        if latest is not None:
            raise CLIError(f"--out: {loc} already holds checkpoints (latest {latest.name}); pass "
                           "--resume to continue it or choose another directory")
        cfg = config_from_args(args)
    device = check_device(args.device)
    set_threads(args.threads)
    if cfg.cluster.use_gpu is None:  # auto: the config records where --device put the run
        cfg = cfg.replace(cluster=cfg.cluster.resolved(1.0 if device.startswith("cuda") else 0.0))
    check_fits(cfg, device)  # before the first line is printed: a refusal is the only line
    # one run at a time in a run directory: a second is refused before any training
    with storage.lease(loc, "--out", break_lease=args.break_lease):
        return _train(args, loc, cfg, device, latest, out)


def _train(args: argparse.Namespace, loc: storage.Location, cfg: ExperimentConfig, device: str,
           latest: storage.Location | None, out: Path) -> int:
    """Train `cfg` into `loc`, whose lease this process holds; print where it went."""
    from abacus_ray.model.checkpoint import latest_checkpoint
    from abacus_ray.training.budget import budget_terms
    from abacus_ray.training.loop import train

    m, t = cfg.model, cfg.task
    limits = budget_in_words(budget_terms(cfg))
    print(f"training {cfg.name}: {t.name} size {t.train_max_len}, {m.layers}x{m.recurrences} "
          f"{m.positions}, on {device}; budget {'; '.join(limits)}"
          + (f"; resuming {latest}" if args.resume else ""), file=sys.stderr, flush=True)
    report = ProgressLine(sys.stderr) if loc.local else Mirror(ProgressLine(sys.stderr), loc)
    result = train(cfg, device, report=report, checkpoint_dir=out,
                   resume_from=latest if args.resume else None)
    diverged = result.metrics.get("diverged_at_step")
    if not loc.local:
        if diverged is None:
            report.copy(result.checkpoint)
        storage.delete(storage.on_disk(out), quiet=True)  # the local staging copy
    # the loop saved nothing of the spoiled weights; earlier checkpoints stand
    if diverged is not None:
        last = latest_checkpoint(loc)
        kept = (
            f"the last checkpoint is {last}"
            if last is not None
            else "no checkpoint was written before"
        )
        print(
            f"train: diverged at step {diverged} (its loss or gradient norm was not finite); the "
            f"weights were not updated or saved, {kept}; lower train.lr or change the config",
            file=sys.stderr,
        )
        return 1
    print(f"checkpoint: {result.checkpoint if loc.local else loc / Path(result.checkpoint).name}")
    print(f"model_id: {result.model_id}")
    return 0
