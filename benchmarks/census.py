"""A census of the processes a run started: where they listen, how much memory and how many files.

Two checks lean on it: the test suite fails if any Ray process it started listens on a non-loopback
address (`tests/conftest.py`, `tests/test_loopback_listeners.py`), and `benchmarks/soak.py` watches memory, open
files and process counts stay flat over many sweeps. "Started by us" means descendants of a root
process: an embedded Ray's daemons and workers are children of the driver, and `ray start --block`
keeps a head's daemons under the `ray start` process.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil


@dataclass(frozen=True)
class Listener:
    pid: int
    process: str
    ip: str
    port: int

    def __str__(self) -> str:
        return f"{self.process} (pid {self.pid}) listens on {self.ip}:{self.port}"


@dataclass(frozen=True)
class Census:
    processes: int  # descendants of the root
    ray_processes: int  # those whose title or command line names Ray
    rss_mb: float  # resident memory of the root and its descendants
    open_files: int  # file descriptors of the root and its descendants
    rss_by_process: dict[str, float] = field(default_factory=dict)  # MB per process title (summed)

    def growth(self, earlier: Census, top: int = 5) -> list[tuple[str, float]]:
        """The process titles whose memory grew most since `earlier` (MB), largest first."""
        titles = set(self.rss_by_process) | set(earlier.rss_by_process)
        deltas = [(t, self.rss_by_process.get(t, 0.0) - earlier.rss_by_process.get(t, 0.0)) for t in titles]
        return sorted(deltas, key=lambda d: -d[1])[:top]


def is_loopback(ip: str) -> bool:
    """127.0.0.0/8, ::1 and IPv4-mapped loopback (::ffff:127.0.0.1); '::' and '0.0.0.0' are not."""
    addr = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


def descendants(root: int | None = None) -> list[psutil.Process]:
    """The root (default: this process) and every live process below it.

    Retried: a process exiting in the middle of the walk can make psutil's recursive walk fail.
    """
    for _ in range(5):
        try:
            proc = psutil.Process(root or os.getpid())
            return [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
        except (psutil.Error, OSError):
            time.sleep(0.01)
    return []


def title(proc: psutil.Process) -> str:
    """The command line, or the title Ray sets (`ray::RayTrainWorker...`); '' once the process is gone."""
    try:
        return " ".join(proc.cmdline()).strip() or proc.name()
    except (psutil.Error, OSError):
        return ""


def _short(title: str) -> str:
    """'raylet', 'gcs_server', 'log_monitor.py', 'ray::RayTrainWorker': one name per kind of process."""
    words = title.split()
    if not words or not words[0].startswith(("/", ".")):
        return title.split(" --")[0][:60]
    if os.path.basename(words[0]).startswith("python"):
        words = [w for w in words[1:] if not w.startswith("-")] or words
    return os.path.basename(words[0])


def listeners(roots: list[int] | None = None) -> list[Listener]:
    """Listening TCP sockets of the roots' process trees (one system-wide scan)."""
    procs = {p.pid: p for root in (roots or [os.getpid()]) for p in descendants(root)}
    found = []
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in procs:
            found.append(Listener(conn.pid, title(procs[conn.pid])[:80], conn.laddr.ip, conn.laddr.port))
    return found


def exposed(roots: list[int] | None = None) -> list[Listener]:
    """The listeners reachable from other machines (bound to a non-loopback address)."""
    return [entry for entry in listeners(roots) if not is_loopback(entry.ip)]


def _address(hex_ip: str) -> str:
    """An address as /proc/net/tcp{,6} writes it (32-bit words in host order, here little-endian)."""
    raw = bytes.fromhex(hex_ip)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, words)


def exposed_sockets() -> dict[tuple[str, int], int]:
    """This network namespace's listening TCP sockets bound off loopback, (ip, port) -> socket inode:
    two small files, where finding their processes means reading every process's descriptors."""
    found = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            if " 0A " not in row:  # TCP_LISTEN, the state column
                continue
            fields = row.split()
            if fields[3] != "0A":
                continue
            hex_ip, hex_port = fields[1].split(":")
            ip = _address(hex_ip)
            if not is_loopback(ip):
                found[(ip, int(hex_port, 16))] = int(fields[9])
    return found


class ExposedScan:
    """`exposed()` for a watch that scans again and again. A listener off loopback held by a process
    outside the roots' trees (the machine's own services) is remembered by its socket, so a scan whose
    exposed sockets are all known reads `exposed_sockets()` only; any other socket costs a full scan."""

    def __init__(self, roots: list[int] | None = None) -> None:
        self.roots = roots or [os.getpid()]
        self.outside: set[int] = set()  # socket inodes held outside the trees
        self.full_scans = 0

    def __call__(self) -> list[Listener]:
        sockets = exposed_sockets()
        if not set(sockets.values()) - self.outside:
            return []
        self.full_scans += 1
        procs = {p.pid: p for root in self.roots for p in descendants(root)}
        found = []
        for conn in psutil.net_connections(kind="inet"):
            if conn.status != psutil.CONN_LISTEN or is_loopback(conn.laddr.ip):
                continue
            if conn.pid in procs:
                found.append(Listener(conn.pid, title(procs[conn.pid])[:80], conn.laddr.ip, conn.laddr.port))
            # no pid: a process whose descriptors this one may not read (another user's, the
            # machine's init), never one of the trees' own
            elif conn.pid is None or self._outside(conn.pid):
                inode = sockets.get((conn.laddr.ip, conn.laddr.port))
                if inode is not None:
                    self.outside.add(inode)
        return found

    def _outside(self, pid: int) -> bool:
        """Whether `pid` is known to descend from none of the roots (a process started since the
        walk above, or one gone, is not known)."""
        try:
            return not {p.pid for p in psutil.Process(pid).parents()} & set(self.roots)
        except psutil.Error:
            return False


def census(root: int | None = None) -> Census:
    """Counts and sizes over the root's process tree; processes that vanish mid-scan are skipped."""
    procs = descendants(root)
    rss = files = ray = 0
    by_title: dict[str, float] = {}
    for proc in procs:
        try:
            name = title(proc)
            mem = proc.memory_info().rss
            files += proc.num_fds()
        except psutil.Error:
            continue
        rss += mem
        ray += "ray" in name.lower()
        key = _short(name)
        by_title[key] = by_title.get(key, 0.0) + mem / 2**20
    return Census(processes=len(procs) - 1, ray_processes=ray, rss_mb=rss / 2**20, open_files=files,
                  rss_by_process=by_title)
