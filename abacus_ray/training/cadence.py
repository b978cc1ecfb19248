"""When a training run checkpoints, validates and reports: decided from the agreed clock and step.

Under DDP every rank calls the same decision with the same numbers (rank 0's clock, agreed once a
step: `training/parallel.py`), so all ranks checkpoint, validate and report at the same steps;
under Ray Train a report is a barrier, and a rank that skipped one would wait in DDP's next
all-reduce. A periodic checkpoint stops short of the end (f = 1), which always saves.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Due:
    """What one step calls for."""

    checkpoint: bool
    validation: bool
    report: bool


@dataclass
class Cadence:
    """`checkpoint_every_s` and `report_every_s` seconds of agreed wall time; a validation every
    `validation_every` steps (None: the run validates nothing)."""

    checkpoint_every_s: float
    report_every_s: float
    validation_every: int | None
    last_checkpoint_s: float = 0.0
    last_report_s: float = 0.0

    @classmethod
    def starting(cls, now: float, checkpoint_every_s: float, report_every_s: float,
                 validation_every: int | None) -> Cadence:
        return cls(checkpoint_every_s, report_every_s, validation_every, now, now)

    def after_step(self, now: float, fraction: float, step: int) -> Due:
        """What the step that just ended calls for, and the clocks moved on accordingly: a report
        whenever a checkpoint or a validation ran, or the report interval has passed."""
        running = fraction < 1.0
        checkpoint = running and now - self.last_checkpoint_s >= self.checkpoint_every_s
        validation = self.validation_every is not None and step % self.validation_every == 0
        report = running and (checkpoint or validation
                              or now - self.last_report_s >= self.report_every_s)
        if checkpoint:
            self.last_checkpoint_s = now
        if report:
            self.last_report_s = now
        return Due(checkpoint, validation, report)
