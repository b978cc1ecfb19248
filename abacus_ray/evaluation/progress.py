"""A dependency-free progress bar with ETA on stderr.

Cells differ in cost by orders of magnitude (a 1x1 cell vs a 160x160 one), so the ETA extrapolates
from the *work* done (estimated tokens), not from the cell count. On a terminal the line redraws in
place; otherwise (logs, CI) a line is printed at most every `every_s` seconds.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:d}:{s:02d}"


class Progress:
    def __init__(self, total_cells: int, total_work: float, label: str = "", *,
                 stream: TextIO | None = None, enabled: bool = True, every_s: float = 5.0) -> None:
        self.total_cells, self.total_work = total_cells, max(total_work, 1e-9)
        self.label, self.stream = label, stream or sys.stderr
        self.enabled, self.every_s = enabled, every_s
        self.cells = 0
        self.work = 0.0
        self.start = time.monotonic()
        self._last = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self) -> str:
        frac = min(1.0, self.work / self.total_work)
        elapsed = time.monotonic() - self.start
        eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
        bar = "#" * int(20 * frac) + "-" * (20 - int(20 * frac))
        eta_s = _clock(eta) if eta == eta else "?"
        return (f"{self.label} [{bar}] {self.cells}/{self.total_cells} cells {100 * frac:5.1f}% "
                f"elapsed {_clock(elapsed)} eta {eta_s}")

    def update(self, cells: int, work: float) -> None:
        self.cells += cells
        self.work += work
        if not self.enabled:
            return
        now = time.monotonic()
        if self._tty:
            self.stream.write("\r" + self.line())
            self.stream.flush()
        elif now - self._last >= self.every_s or self.cells >= self.total_cells:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._last = now

    def close(self) -> None:
        if self.enabled and self._tty:
            self.stream.write("\n")
            self.stream.flush()
