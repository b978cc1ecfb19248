"""Shared test settings: small thread counts so the suite behaves the same on 2-core CI machines,
one embedded Ray per test process, and a watch over every socket the suite's processes listen on.
"""

import atexit
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `benchmarks.census`: the suite's listener watch

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "token")  # as the product: every Ray the suite starts checks tokens
# A Ray temp dir per test process (xdist workers run side by side): Rays on one host that share one
# session directory clean up each other's files. Short, for Ray's socket paths.
RAY_TMPDIR = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
os.environ["RAY_TMPDIR"] = str(RAY_TMPDIR)
atexit.register(shutil.rmtree, RAY_TMPDIR, ignore_errors=True)  # after every Ray of this process stopped

import torch  # noqa: E402

# The cores shared out among the xdist workers, so that in-process training does not oversubscribe them
# (the suite is CPU-bound: docs/guide.md, "Tests").
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
THREADS = max(1, min(2, (os.cpu_count() or 1) // WORKERS))
torch.set_num_threads(THREADS)

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def ray_session(request):
    """A callable that makes sure the suite's embedded Ray runs (see `ray_local`); for wider fixtures."""
    import ray

    from abacus_ray.cluster import runtime

    def ensure():
        os.environ.pop("RAY_ADDRESS", None)
        if not ray.is_initialized():
            os.environ.setdefault("ABACUS_RAY_OBJECT_STORE_MB", "200")
            runtime.init(num_cpus=2, num_gpus=1)  # the product's own embedded-Ray start-up (loopback only)
            runtime.quiet_data_progress()
        return ray

    yield ensure
    ray.shutdown()


@pytest.fixture
def ray_local(ray_session):
    """An embedded local Ray on 127.0.0.1 with 2 CPUs and one fake GPU slot, shared by the session.

    Started once per test process (each xdist worker has its own) by the first test that needs it,
    and again only if a test stopped it to free the cores: Ray's start-up and shutdown cost seconds,
    and the tests using it need no fresh cluster. Its processes are this process's descendants, so
    the fault tests can find and kill a Train worker. The fake GPU makes every Ray Data evaluation run
    a GPU pool beside the CPU pool; the GPU actor falls back to the CPU because CUDA is absent.
    """
    return ray_session()


@pytest.fixture(autouse=True)
def _same_threads():
    """Put back torch's thread count: a command run in-process (`train`, `eval`) sizes it to the
    idle CPUs, and two workers at two threads each on 2 cores made the small tests after it 10-30x
    slower (OpenMP threads spinning against each other)."""
    yield
    if torch.get_num_threads() != THREADS:
        torch.set_num_threads(THREADS)


@pytest.fixture(autouse=True)
def _same_working_dir():
    """Put back the working directory: a sweep driver moves into its storage (`api.checks.leave_working_dir`)."""
    cwd = os.getcwd()
    yield
    os.chdir(cwd)


def module_cost(items: list) -> float:
    """A module's measured seconds: the largest `cost` mark of its tests (a module-level mark: the whole
    module's); a module without one costs 1 if it starts Ray or is slow, else 0."""
    marks = [m.args[0] for item in items if (m := item.get_closest_marker("cost"))]
    if marks:
        return max(marks)
    return float(any(item.get_closest_marker("slow") or item.get_closest_marker("ray") for item in items))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks added here
def pytest_collection_modifyitems(session, config, items):
    """Every test that starts an S3 server (the `s3` fixture: a `weed` process, seconds) is `slow`."""
    for item in items:
        if "s3" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


class CostOrder:
    """The costliest modules first, each of the first ones followed by a cheap module; a plugin of its own
    so that it runs after `-m` deselected (a module's cost is that of its tests in the tier being run).

    `make test` runs `--dist loadfile --no-loadscope-reorder`: whole modules go to the xdist workers in
    this order. A worker is sent its next module when its current one is down to its last two tests,
    so a one-test module of five minutes has its successor waiting behind it from the start: the first
    `WORKERS` costly modules are therefore each followed by a cheap one, and the rest of the costly ones
    go to whichever worker frees up first (longest first).
    """

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        modules: dict[str, list] = {}
        for item in items:
            modules.setdefault(item.module.__name__, []).append(item)
        cost = {name: module_cost(group) for name, group in modules.items()}
        costly = sorted((name for name in modules if cost[name]), key=lambda name: -cost[name])  # stable
        cheap = [name for name in modules if not cost[name]]
        order = costly[:WORKERS] + cheap[:WORKERS] + costly[WORKERS:] + cheap[WORKERS:]
        items[:] = [item for name in order for item in modules[name]]


_RUNNING: list = []  # the test being run, for `pytest_fixture_setup`


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _RUNNING.append(item)
    try:
        yield
    finally:
        _RUNNING.pop()


def pytest_fixture_setup(fixturedef, request):
    """The `s3` fixture starts a server only for a test marked slow (`make test-fast` promises
    none). The collection hook above marks the tests that name it; one asked for at run time
    (`request.getfixturevalue`, a fixture's param) is seen only here, and must carry the mark
    itself."""
    item = _RUNNING[-1] if _RUNNING else None
    if fixturedef.argname == "s3" and item is not None and not item.get_closest_marker("slow"):
        pytest.fail(f"{item.nodeid} starts an S3 server (fixture `s3`) but is not marked slow: "
                    "mark it, or the fixture param that asks for the server "
                    "(pytest.param(..., marks=pytest.mark.slow))", pytrace=False)


class ListenerWatch:
    """Samples the listening sockets of this process tree in the background; keeps the exposed ones.

    Every Ray process the suite starts (embedded Ray, Train workers and their c10d/gloo sockets, the
    `ray start --block` head of the job test) descends from the pytest process, so one scan of the tree
    every `interval` seconds sees them all. Any listener on a non-loopback address fails the session.
    """

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.exposed: set = set()
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="listener-watch", daemon=True)

    def _run(self) -> None:
        from benchmarks.census import ExposedScan

        scan = ExposedScan()  # the machine's own off-loopback services are told apart once, by socket
        while not self._stop.wait(self.interval):
            self.exposed.update(scan())
            self.scans += 1

    def start(self) -> "ListenerWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the xdist controller's watch covers its workers' trees
        session.config._listener_watch = ListenerWatch().start()


def pytest_sessionfinish(session, exitstatus):
    watch = getattr(session.config, "_listener_watch", None)
    if watch is not None:
        watch.stop()
        if watch.exposed:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    watch = getattr(config, "_listener_watch", None)
    if watch is None:
        return
    if watch.exposed:
        lines = "\n".join(f"  {entry}" for entry in sorted(watch.exposed, key=str))
        terminalreporter.write_line(f"FAILED listener watch: processes of this suite listened off loopback:\n{lines}",
                                    red=True)
    else:
        terminalreporter.write_line(f"listener watch: {watch.scans} scans, every listener of the suite's processes "
                                    "on loopback")


# The bad-input tests' fixtures (tests/refusal.py), shared by test_bad_input*.py and test_untrusted.py.
from refusal import (  # noqa: E402, F401
    bad_input_tally,
    ckpt,
    mul_ckpt,
    no_ray,
    unwritable,
    work,
)
from refusal import pytest_configure as _bad_input_report  # noqa: E402


def pytest_configure(config):
    _bad_input_report(config)
    config.pluginmanager.register(CostOrder(), "abacus-ray-cost-order")
