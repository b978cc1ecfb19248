"""One owner per output directory: a lease a run takes before any work and gives back at its end.

Two sweeps into one `--storage`, or two `train` runs into one `--out`, would train into the same
trial directories and leave a mix of both. So a run that writes a directory takes its lease first,
the file `.lease` in it: on a local disk by an exclusive create (`O_CREAT | O_EXCL`: of two runs
exactly one gets it); on an object store, which `pyarrow.fs` offers no conditional write for, by
writing this run's token, waiting `SETTLE_S` and reading it back (the later of two writers wins,
and the earlier sees another token and stops before any work). A second run is refused in one
line naming the owner (host, pid, start) and exit 2. A lease left by a run that was killed is
taken over with one line where this machine can tell its process is gone (same host, no such
process); elsewhere, `--break-lease` takes it over, also with one line: never silently. Results
directories are keyed per cell and shared by design: they take no lease.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil

from abacus_ray.storage.files import (
    delete,
    exists,
    missing_dirs,
    naming_full_disk,
    read_json,
    remove_empty,
    write_text,
)
from abacus_ray.storage.location import Location, StorageError

LEASE_FILE = ".lease"
SETTLE_S = 1.0  # object stores: how long a written lease must stay ours before work starts


def _mine() -> dict:
    me = psutil.Process()
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": me.create_time(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "token": uuid.uuid4().hex}


def _gone(owner: dict) -> bool:
    """Whether the owner is a process of this host that no longer runs (its pid free or reused)."""
    if owner.get("host") != socket.gethostname() or not isinstance(owner.get("pid"), int):
        return False
    try:
        return abs(psutil.Process(owner["pid"]).create_time() - float(owner.get("started", 0))) > 1
    except (psutil.NoSuchProcess, ValueError, TypeError):
        return True
    except psutil.Error:
        return False


def _who(owner: dict) -> str:
    return (f"pid {owner.get('pid')} on {owner.get('host')} since {owner.get('since')}"
            if owner else "an unreadable lease")


def _read(path: Location) -> dict:
    try:
        return read_json(path)
    except (OSError, ValueError):
        return {}


def _take(path: Location, me: dict) -> bool:
    """Write our lease where none is; False where another run's stands."""
    text = json.dumps(me, indent=2)
    if path.local:
        try:
            fd = os.open(path.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            with naming_full_disk(path.path), os.fdopen(fd, "w") as fh:
                fh.write(text)
        except OSError:
            os.unlink(path.path)  # no lease half-written
            raise
        return True
    if exists(path):
        return False
    write_text(path, text)
    time.sleep(SETTLE_S)  # a second writer in this window overwrites ours: we then see its token
    return _read(path).get("token") == me["token"]


def _acquire(directory: Location, path: Location, me: dict, flag: str, break_lease: bool) -> None:
    """Take the lease at `path` for `me`, or refuse naming its holder."""
    if not _take(path, me):
        owner = _read(path)
        if not (break_lease or _gone(owner)):
            raise StorageError(
                f"{flag}: {directory} is in use by another run ({_who(owner)}); wait for it to "
                "end, or, if that run is gone, rerun with --break-lease")
        how = "broken (--break-lease)" if break_lease else "taken over: that process is gone"
        print(f"lease of {directory}: the lease of {_who(owner)} {how}", file=sys.stderr)
        delete(path, quiet=True)
        if not _take(path, me):
            raise StorageError(f"{flag}: {directory} was taken by another run meanwhile "
                               f"({_who(_read(path))})")


@contextlib.contextmanager
def lease(directory: Location, flag: str, *, break_lease: bool = False) -> Iterator[None]:
    """Hold the lease of `directory` (made where missing) for the `with` block; refused in one
    `StorageError` line naming `flag` where another run holds it."""
    made = missing_dirs(Path(directory.path)) if directory.local else []
    if directory.local:
        os.makedirs(directory.path, exist_ok=True)
    path, me = directory / LEASE_FILE, _mine()
    try:
        _acquire(directory, path, me, flag, break_lease)
    except BaseException:
        remove_empty(made)
        raise
    try:
        yield
    finally:
        if _read(path).get("token") == me["token"]:
            delete(path, quiet=True)
        remove_empty(made)  # a run that wrote nothing leaves no directory of its own
