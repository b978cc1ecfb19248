"""What became of each trial of a sweep: one status, computed here and nowhere else.

* `finished`: it spent its budget; its last report is final and did not diverge;
* `stopped`: it ended early without an error (ASHA stopped it, or the sweep was interrupted);
* `diverged`: its loss or gradient norm stopped being finite; the loop ended it without saving those
  weights (its final report carries `diverged_at_step`);
* `error`: the trial raised (after Tune's retries), or met a full disk (its last report carries
  `disk_full`, the reason: no retry would help).

The sweep's closing line, `search.parquet`, `timeline.parquet`, the dashboard and `--confirm` take a
trial's status from `status`. The driver also keeps the sweep's *trial record*, `trials.parquet`
beside `results/`: one row per trial with its status and the checkpoint it left (relative to the
sweep's directory), so that `eval-all` knows, without Ray, which checkpoints a sweep scored (only
finished trials') and what else `--include` may add. Pure: no I/O, no Ray, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

FINISHED, STOPPED, DIVERGED, ERROR = "finished", "stopped", "diverged", "error"
STATUSES = (FINISHED, STOPPED, DIVERGED, ERROR)

RECORD_SCHEMA = pa.schema([
    ("run", pa.string()),  # the trial's run name, e.g. fig10_k/max_k=25_seed=0
    ("trial_id", pa.string()),
    ("status", pa.string()),  # one of STATUSES
    ("reason", pa.string()),  # an error's type and first line, or "diverged at step N"; else null
    ("checkpoint", pa.string()),  # its last checkpoint, relative to the sweep's directory, or null
    ("step", pa.int64()),  # the step of its last report
])


def _given(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def status(last_report: Mapping[str, Any] | None, *, errored: bool) -> str:
    """A trial's status from its last report and whether it raised. A diverged run's final report is
    also `final`: divergence is checked first, so it is never counted as finished."""
    report = last_report or {}
    if _given(report.get("diverged_at_step")):
        return DIVERGED
    if errored or _given(report.get("disk_full")):
        return ERROR
    return FINISHED if report.get("final") is True else STOPPED


def parse_include(text: str | None, flag: str = "--include") -> frozenset[str]:
    """The statuses a command scores: finished always, plus a comma list of the others."""
    if text is None:
        return frozenset({FINISHED})
    others = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in others if s not in STATUSES]
    if bad or not others:
        shown = repr(bad[0]) if bad else repr(text)
        raise ValueError(f"{flag}: {shown[:80]} is not a trial status; give a comma list of "
                         f"{', '.join(s for s in STATUSES if s != FINISHED)}")
    return frozenset({FINISHED, *others})


def relative_checkpoint(path: str | None, root: str) -> str | None:
    """`path` (a local path or URI) relative to the sweep directory `root`; None if outside it."""
    if not path:
        return None
    base = root.rstrip("/") + "/"
    if not path.startswith(base):
        return None
    return path[len(base):].strip("/") or None


def record_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """The trial record (`RECORD_SCHEMA`) from rows with its fields, one per trial."""
    rows = [{name: r.get(name) for name in RECORD_SCHEMA.names} for r in rows]
    return pa.Table.from_pylist(rows, schema=RECORD_SCHEMA)


def checkpoints_to_score(record: pa.Table, include: frozenset[str], where: str) -> list[str]:
    """The checkpoints (relative to the sweep directory, sorted) of the trials whose status is in
    `include`. A record that is not one, or that names a place outside its sweep, is refused naming
    `where`."""
    missing = [c for c in ("run", "status", "checkpoint") if c not in record.column_names]
    if missing:
        raise ValueError(f"{where}: not a trial record (no {missing[0]} column)")
    found = set()
    for row in record.select(["run", "status", "checkpoint"]).to_pylist():
        if row["status"] not in STATUSES:
            raise ValueError(f"{where}: unknown trial status {str(row['status'])[:40]!r}")
        if row["status"] not in include or not row["checkpoint"]:
            continue
        path = str(row["checkpoint"])
        if path.startswith("/") or "://" in path or ".." in path.split("/") or "\\" in path:
            raise ValueError(f"{where}: checkpoint {path[:80]!r} is not inside the sweep's "
                             "directory")
        found.add(path)
    return sorted(found)


def counts(statuses: Sequence[str]) -> str:
    """'3 finished, 1 stopped, 1 diverged' in the order of STATUSES (statuses that occur only)."""
    return ", ".join(f"{statuses.count(s)} {s}" for s in STATUSES if s in statuses)
