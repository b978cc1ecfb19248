"""The test tiers keep their promises: `make test`, `make test-scenarios` and `make test-many-nodes`
split the suite, and `make test-fast` (no Ray, nothing slow) starts no S3 server.

A test that asks for the `s3` fixture at run time (`request.getfixturevalue`, say through a
parametrised fixture) escapes the collection hook that marks S3 tests slow (`conftest.py`), so
`-m "not slow"` kept it and the fast tier started a `weed` process."""

import json
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


def test_the_fast_tier_of_every_s3_module_starts_no_s3_server(tmp_path):
    modules = [str(p) for p in sorted(TESTS.glob("test_*.py"))
               if p.name != Path(__file__).name and "s3server" in p.read_text()]
    assert modules
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", tier_marks()["test-fast"]]
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


# A collection-only run (no test runs, no Ray starts) that prints each item's marks as one JSON line.
COLLECT_MARKS = """
import json, sys
import pytest

class Marks:
    def pytest_collection_finish(self, session):
        marks = {i.nodeid: sorted({m.name for m in i.iter_markers()}) for i in session.items}
        print("MARKS " + json.dumps(marks))

sys.exit(pytest.main(["-q", "-s", "--collect-only", "-p", "no:cacheprovider", "-n", "0"], plugins=[Marks()]))
"""


def tier_marks() -> dict[str, str]:
    """The `-m` expression of every tier target of the Makefile (`GATED` for `make test`), read from it."""
    text = (ROOT / "Makefile").read_text()
    tiers = {"test": re.search(r'^GATED\s*:=\s*-m "([^"]+)"', text, re.M).group(1)}
    for target in ("test-fast", "test-scenarios", "test-many-nodes"):
        tiers[target] = re.search(rf'^{target}:.*\n\t.*?-m (?!pytest)("[^"]+"|\S+)', text, re.M).group(1).strip('"')
    return tiers


def test_every_test_is_in_exactly_one_gating_tier_and_the_fast_tier_is_inside_make_test():
    """`make test`, `make test-scenarios` and `make test-many-nodes` split the suite: a test in none of
    them would never run, one in two would run twice in CI; `make test-fast` only picks from `make test`."""
    from _pytest.mark.expression import Expression

    out = subprocess.run([sys.executable, "-c", COLLECT_MARKS], cwd=ROOT, capture_output=True, text=True, timeout=300)
    line = next((x for x in out.stdout.splitlines() if x.startswith("MARKS ")), None)
    assert out.returncode == 0 and line, out.stdout[-3000:] + out.stderr[-3000:]
    marks = json.loads(line.removeprefix("MARKS "))
    tiers = {name: Expression.compile(expr) for name, expr in tier_marks().items()}

    def members(tier: str) -> set[str]:
        return {node for node, names in marks.items() if tiers[tier].evaluate(set(names).__contains__)}

    gating = {tier: members(tier) for tier in ("test", "test-scenarios", "test-many-nodes")}
    counts = {node: sum(node in m for m in gating.values()) for node in marks}
    assert [n for n, c in counts.items() if c != 1] == []
    assert members("test-fast") <= gating["test"]
    assert gating["test-scenarios"] and gating["test-many-nodes"] and len(members("test-fast")) > 1000
