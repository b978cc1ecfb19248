"""`ruff check` (the project's lint, `make lint`) passes on every linted tree.

The rules, the 100-character line length included, are pyproject.toml's `[tool.ruff]`; tests and
benchmarks are exempt from the line length only.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TREES = ("abacus_ray", "dashboards", "sweeps", "tests", "benchmarks")


def _ruff() -> list[str]:
    """The ruff of this interpreter's environment (the dev extras install it)."""
    beside = Path(sys.executable).parent / "ruff"
    if beside.is_file():
        return [str(beside)]
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    pytest.skip("ruff is not installed (pip install -e '.[dev]')")


def test_ruff_check_passes():
    cmd = [*_ruff(), "check", "--no-cache", *TREES]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
