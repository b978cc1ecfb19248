"""Nothing the service starts listens beyond loopback: Ray's daemons, Train workers, DDP's c10d store.

The suite-wide watch in conftest fails the session on any exposed listener; these tests make the two
risky cases explicit (a 2-worker gloo DDP trial, Ray Data evaluation actors) and show the watch can
see an exposed socket at all. (Ray's stock `TorchConfig` rendezvous was seen listening on `:::port`
from `ray::RayTrainWorker`; a control test that opens it would itself trip the suite-wide watch, so
there is none.)
"""

import os
import signal
import subprocess
import sys
import threading

import pytest

from abacus_ray.storage import on_disk
from benchmarks.census import ExposedScan, exposed, is_loopback, listeners

pytestmark = [pytest.mark.ray, pytest.mark.cost(75)]


class Sampler:
    """Scans this process tree's listeners every 0.1 s while a block runs."""

    def __init__(self) -> None:
        self.all, self.exposed, self._stop = set(), set(), threading.Event()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            found = listeners()
            self.all.update(found)
            self.exposed.update(entry for entry in found if not is_loopback(entry.ip))

    def __enter__(self) -> "Sampler":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.parametrize("ip, loopback", [("127.0.0.1", True), ("127.3.4.5", True), ("::1", True),
                                          ("::ffff:127.0.0.1", True), ("0.0.0.0", False), ("::", False),
                                          ("10.0.0.7", False), ("::ffff:10.0.0.7", False), ("fe80::1%eth0", False)])
def test_is_loopback(ip, loopback):
    assert is_loopback(ip) is loopback


def test_census_sees_an_exposed_listener():
    """The watch is not blind: a process listening on 0.0.0.0 is reported, its 127.0.0.1 socket is not,
    and the suite's repeated scan tells a listener outside its tree apart once.

    The listener is detached from pytest's process tree (started in the background by a shell that
    exits), so the suite-wide watch does not count this deliberate exposure.
    """
    code = ("import os, socket, time\n"
            "a = socket.socket(); a.bind(('0.0.0.0', 0)); a.listen()\n"
            "b = socket.socket(); b.bind(('127.0.0.1', 0)); b.listen()\n"
            "print(os.getpid(), a.getsockname()[1], b.getsockname()[1], flush=True); time.sleep(60)\n")
    shell = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -c "$0" &', code], stdout=subprocess.PIPE, text=True)
    pid, open_port, loop_port = map(int, shell.stdout.readline().split())
    shell.wait()
    try:
        found = {(entry.pid, entry.port) for entry in exposed(roots=[pid])}
        assert (pid, open_port) in found
        assert (pid, loop_port) not in found
        assert not any(entry.pid == pid for entry in exposed())  # not ours: outside this process tree
        # the suite's watch: the outside socket found once by a full scan, then known by its inode alone
        ours, its = ExposedScan(), ExposedScan(roots=[pid])
        assert ours() == [] and ours() == [] and ours.full_scans == 1
        assert (pid, open_port) in {(entry.pid, entry.port) for entry in its()}
    finally:
        os.kill(pid, signal.SIGKILL)


def test_ddp_trial_and_grid_evaluation_listen_on_loopback_only(ray_local, tmp_path):
    """A 2-worker gloo DDP TorchTrainer trial (c10d rendezvous included) and Ray Data evaluation."""
    from abacus_ray import storage
    from abacus_ray.cluster.driver import run_sweep
    from abacus_ray.cluster.grid_eval import evaluate_on_ray
    from abacus_ray.evaluation.grids import parse_cells
    from abacus_ray.evaluation.results import read_cells
    from abacus_ray.evaluation.work import work_items
    from abacus_ray.sweep import single

    trial = {"cluster.workers": 2, "cluster.cpus_per_worker": 0.5, "train.max_steps": 12,
             "train.budget_hours": 100.0}
    with Sampler() as during_training:
        finished = run_sweep("net", "tiny", single("net", "tiny", trial), storage_root=storage.resolve(tmp_path),
                             grids={}, evaluate=False).finished
    assert len(finished) == 1
    (source, cfg), = finished
    with Sampler() as during_eval:
        results = on_disk(tmp_path / "results")
        work = work_items([source], [parse_cells("1-2x1-2")], cfg.eval, results)
        evaluate_on_ray(work, cfg.eval, results, progress=False)
    assert len(read_cells(results)) == 4
    assert during_training.all and during_eval.all, "the sampler saw no listener at all"
    assert not during_training.exposed, sorted(map(str, during_training.exposed))
    assert not during_eval.exposed, sorted(map(str, during_eval.exposed))
