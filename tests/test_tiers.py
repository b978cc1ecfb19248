"""The test tiers keep their promises: `make test-fast` (no Ray, nothing slow) starts no S3 server.

A test that asks for the `s3` fixture at run time (`request.getfixturevalue`, say through a
parametrised fixture) escapes the collection hook that marks S3 tests slow (`conftest.py`), so
`-m "not slow"` kept it and the fast tier started a `weed` process."""

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.census import descendants

pytestmark = pytest.mark.slow  # a pytest run of its own (seconds)

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def fast_marks() -> str:
    """The `-m` expression of `make test-fast`, read from the Makefile."""
    rule = re.search(r'^test-fast:.*\n\t.*-m "([^"]+)"', (ROOT / "Makefile").read_text(), re.M)
    return rule.group(1)


def test_the_fast_tier_of_every_s3_module_starts_no_s3_server(tmp_path):
    modules = [str(p) for p in sorted(TESTS.glob("test_*.py"))
               if p.name != Path(__file__).name and "s3server" in p.read_text()]
    assert modules
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", fast_marks()]
    proc = subprocess.Popen([*cmd, *modules], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    started = set()
    while proc.poll() is None:  # a server lives seconds at least (started, probed, stopped)
        started |= {p.pid for p in descendants(proc.pid) if _name(p) == "weed"}
        time.sleep(0.05)
    out = proc.stdout.read()
    assert not started, f"{len(started)} S3 server(s) started:\n{out[-3000:]}"
    assert proc.returncode == 0 and " passed" in out, out[-3000:]


def _name(p) -> str:
    try:
        return p.name()
    except Exception:  # noqa: BLE001 - gone meanwhile
        return ""
