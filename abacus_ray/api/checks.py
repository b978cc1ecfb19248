"""Checks and set-up that every entry point (the command line, the Python API) makes before its
work starts: a device this machine has, CPUs for an embedded Ray, a cluster that answers, enough
open files, inputs that can be read, a config file; then joining Ray and leaving Ray's working
directory.
Each refusal is one `ValueError` naming the culprit as the command line spells it.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from abacus_ray import storage
from abacus_ray.config import ExperimentConfig
from abacus_ray.text import one_line


def leave_working_dir(directory: Path) -> None:
    """Make `directory` (ours, absolute) the working directory of a long-running driver.

    Under `ray job submit` the driver starts in the job's unpacked `working_dir`, which Ray owns and
    may delete while the job runs (seen on several nodes sharing one temp dir); code that calls
    `os.getcwd()` later (Tune's result listing does) would then fail. Modules are imported by then.
    """
    directory.mkdir(parents=True, exist_ok=True)
    os.chdir(directory)


# Open files Ray's processes need (sockets, pipes, logs of every worker): under `ulimit -n 64` the
# embedded Ray's node died mid-evaluation, at the common default of 1,024 it runs
MIN_OPEN_FILES = 1024


def check_open_files() -> None:
    """Enough open files for Ray: a soft limit below `MIN_OPEN_FILES` is raised toward the hard one
    (which any process may do, and Ray's processes inherit), and a hard limit below it is one
    line naming `ulimit -n`, before anything starts."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= MIN_OPEN_FILES:
        return
    if hard != resource.RLIM_INFINITY and hard < MIN_OPEN_FILES:
        raise ValueError(f"ulimit -n: this process may open {hard:,} files at most; Ray's "
                         f"processes need {MIN_OPEN_FILES:,}: raise the limit (ulimit -n "
                         f"{MIN_OPEN_FILES}) and run again")
    resource.setrlimit(resource.RLIMIT_NOFILE, (MIN_OPEN_FILES, hard))


def check_cluster(address: str | None) -> None:
    """A cluster address (`--address`, else $RAY_ADDRESS) this process can join: a token to present
    and a head that answers on its port within seconds (`cluster.runtime.check_address`), before
    anything is read or created; and enough open files for Ray's processes."""
    from abacus_ray.cluster.runtime import check_address  # imports no Ray: environment and a port

    check_open_files()
    if address is not None:
        check_address(address, "--address")
    elif os.environ.get("RAY_ADDRESS"):
        check_address(os.environ["RAY_ADDRESS"], "--address (from RAY_ADDRESS)")


def join_cluster(address: str | None, *, num_cpus: int | None = None) -> None:
    """Connect to the cluster at `address` (else $RAY_ADDRESS), or start the embedded Ray: a head
    that refuses the token (Ray retries, then raises) is one line naming --address."""
    from abacus_ray.cluster import runtime  # heavy: Ray, only for a command that really runs

    joining = address or os.environ.get("RAY_ADDRESS")
    if not joining or joining == "local":
        runtime.init(address, num_cpus=num_cpus)
        return
    flag = "--address" if address else "--address (from RAY_ADDRESS)"
    try:
        runtime.init(address)
    except Exception as e:  # Ray's own exceptions: ConnectionError, RuntimeError, ...
        raise ValueError(f"{flag}: cannot join the Ray cluster at {joining} "
                         f"({one_line(str(e), 160)}); is RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH's "
                         "file) the cluster's token?") from None


def check_readable(targets: list[str], flag: str) -> list[storage.Location]:
    """Refuse, in one line and in seconds, an input URI (a checkpoint, a run directory) that cannot
    be read: an unknown scheme, credentials in it, an unreachable endpoint, no such bucket. Local
    paths are checked where they are read. Returns them resolved, for the command to pass on."""
    return [storage.probe(target, flag, write=False) for target in targets]


def check_device(name: str, flag: str = "--device") -> str:
    """`auto` (CUDA if available, else CPU) or a torch device string this machine has."""
    import torch  # heavy: loaded by the commands that take --device, not at `abacus-ray --help`

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ValueError(f"{flag}: {name!r} is not a device (auto, cpu, cuda, cuda:N)") from None
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"{flag}: {name!r} is not a device (auto, cpu, cuda, cuda:N)")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{flag}: {name} requested but CUDA is not available")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"{flag}: {name} requested but this machine has "
                           f"{torch.cuda.device_count()} CUDA device(s)")
    return name


def check_num_cpus(n: int | None, flag: str = "--num-cpus") -> int | None:
    """CPUs for an embedded local Ray: at least 1, at most 8 per core of this machine (Ray would
    start a worker process for every CPU it is told of once enough trials or
    evaluators are queued)."""
    if n is None:
        return None
    bound = 8 * (os.cpu_count() or 1)
    if not 1 <= n <= bound:
        raise ValueError(f"{flag}: must be in 1..{bound:,} (8 per core of this machine), got {n:,}")
    return n


def read_config(given: str, overrides: dict) -> ExperimentConfig:
    """The config of `given` (a config.json, or a checkpoint directory holding one) with
    `overrides` applied: `train --config`."""
    loc = storage.resolve(given)
    if storage.is_dir(loc):  # a checkpoint directory: its own config
        loc = loc / "config.json"
    try:
        data = storage.read_json(loc)
    except FileNotFoundError:
        raise ValueError(f"--config {given}: no such config file or checkpoint") from None
    try:
        return ExperimentConfig.from_dict(data).with_overrides(overrides)
    except ValueError as e:
        raise ValueError(f"--config {given}: {e}") from None
