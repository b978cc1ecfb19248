"""Shared machinery of the bad-input tests: run a command in-process, check it was refused (exit 2,
one line naming the culprit, nothing written), tally the cases, and the small checkpoints they corrupt.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

from abacus_ray.cli import main
from abacus_ray.config import preset
from abacus_ray.model import ArithmeticTransformer
from abacus_ray.model.checkpoint import save_checkpoint
from abacus_ray.storage import on_disk

REPO = Path(__file__).resolve().parents[1]
FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SMALL = settings(FUZZ, max_examples=15)

# --- the tally -------------------------------------------------------------------------------------

TALLY: Counter[str] = Counter()


def tally(category: str, n: int = 1) -> None:
    TALLY[category] += n


class _TallyReport:
    """Prints the tally at the end of the session (pytest's terminal summary, whatever `-s` says).

    Under xdist each worker counts its own cases and hands them to the controller as `workeroutput`.
    """

    def __init__(self) -> None:
        self.from_workers: Counter[str] = Counter()

    def pytest_sessionfinish(self, session):
        if hasattr(session.config, "workerinput"):
            session.config.workeroutput["bad_input_tally"] = dict(TALLY)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        self.from_workers.update(getattr(node, "workeroutput", {}).get("bad_input_tally", {}))

    def pytest_terminal_summary(self, terminalreporter):
        total = TALLY + self.from_workers
        if not total:
            return
        terminalreporter.write_sep("-", f"bad input: {sum(total.values())} cases tried, each refused (one line "
                                        "naming the culprit, exit 2, nothing written) or, on dashboards, escaped")
        for category, n in sorted(total.items()):
            terminalreporter.write_line(f"  {n:6d}  {category}")


def pytest_configure(config):
    config.pluginmanager.register(_TallyReport(), "abacus-ray-bad-input-tally")


@pytest.fixture(scope="session", autouse=True)
def bad_input_tally(tmp_path_factory):
    yield TALLY
    (tmp_path_factory.getbasetemp() / "bad_input_tally.json").write_text(
        json.dumps({"total": sum(TALLY.values()), **dict(sorted(TALLY.items()))}, indent=2))


# --- running commands ------------------------------------------------------------------------------

def run(argv: Sequence[str], fn: Callable = main) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = fn(list(argv))
    return code, out.getvalue(), err.getvalue()


def snapshot(*roots: Path) -> set:
    """Every path under `roots`, with size and mtime for files (directory mtimes may move: probes)."""
    seen = set()
    for root in roots:
        for p in Path(root).rglob("*"):
            st_ = p.lstat()
            seen.add((str(p), p.is_dir()) if p.is_dir() else (str(p), st_.st_size, st_.st_mtime_ns))
    return seen


def assert_refused(argv: Sequence[str], culprits: str | Sequence[str], category: str, *, roots: Sequence[Path] = (),
                   fn: Callable = main, prefixes: Sequence[str] = ("abacus-ray",)) -> str:
    """Run `argv`; exit 2, exactly one stderr line `PREFIX...: error: CULPRIT...`, no file changed."""
    culprits = (culprits,) if isinstance(culprits, str) else tuple(culprits)
    before = snapshot(*roots)
    code, out, err = run(argv, fn)
    lines = err.splitlines()
    assert code == 2, (argv, code, err)
    assert len(lines) == 1, (argv, err)
    assert "Traceback" not in err and out == "", (argv, out, err)
    head, sep, message = lines[0].partition(": error: ")
    assert sep and head.startswith(tuple(prefixes)), (argv, lines[0])
    assert message.startswith(culprits), (argv, message, culprits)
    assert snapshot(*roots) == before, argv
    tally(category)
    return message


# --- fixtures ----------------------------------------------------------------------------------------

SMALL_MODEL = ["model.hidden=16", "model.intermediate=32", "model.heads=2", "model.layers=1", "eval.per_cell=3"]


def _save(path: Path, overrides: list[str]) -> Path:
    cfg = preset("tiny", overrides)
    torch.manual_seed(0)
    save_checkpoint(on_disk(path), ArithmeticTransformer.for_experiment(cfg), cfg,
                    {"step": 1, "samples": 64, "device_hours": 0.0, "micro_index": 1, "tokens": 100,
                     "optimizer": {"state": {}, "param_groups": []}})
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bad-input")


@pytest.fixture(scope="module")
def ckpt(work) -> Path:
    """A tiny addition checkpoint with a 128-row Abacus table."""
    return _save(work / "add-ckpt", [*SMALL_MODEL, "model.abacus_table=128"])


@pytest.fixture(scope="module")
def mul_ckpt(work) -> Path:
    """A tiny multiplication checkpoint with a 40-row Abacus table (k <= 15, size-5 training)."""
    return _save(work / "mul-ckpt", [*SMALL_MODEL, "task.name=mul", "model.abacus_table=40"])


@pytest.fixture(scope="module")
def unwritable(tmp_path_factory) -> Path | None:
    """A directory nobody can create anything in: chmod 555 for a normal user; for root (which ignores
    modes) a kernel filesystem that refuses new entries, else None."""
    if os.geteuid() != 0:
        d = tmp_path_factory.mktemp("read-only")
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    for candidate in ("/sys/fs", "/proc/self"):
        try:
            os.rmdir(tempfile.mkdtemp(dir=candidate))
        except OSError:
            yield Path(candidate)
            return
    yield None


def fresh_dir(work: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=work))


@pytest.fixture
def no_ray(monkeypatch):
    """Any attempt to start or join Ray fails the test loudly."""
    from abacus_ray.cluster import runtime

    def refuse(*args, **kwargs):
        raise AssertionError("Ray was started for bad input")

    def running() -> bool:
        ray = sys.modules.get("ray")
        return ray is not None and ray.is_initialized()

    before = running()  # the suite's shared embedded Ray may already run (tests/conftest.py)
    monkeypatch.setattr(runtime, "init", refuse)
    yield
    assert before or not running(), "Ray was started for bad input"

