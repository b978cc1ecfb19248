"""Where a command's CPU goes, every process counted: run it under Linux process accounting and total
the CPU seconds of each process that ran, by name (Ray names its actors `ray::Class`, its daemons
`raylet`, `gcs_server`). Made for `make test` (docs/guide.md, "Tests"): shell `time` counts only the
children a process waited for, and the suite's Ray processes are mostly reaped by others, so `time`
reported a third of the suite's CPU.

    python benchmarks/suite_cpu.py [--top 25] [--file acct.bin] -- make test
    python benchmarks/suite_cpu.py --read acct.bin          # a file written earlier by `accton`

Needs root and `accton` (Debian's `acct`), and counts every process that ends on the machine while the
command runs. Not in `make bench`: it runs the whole suite (`make suite-cpu`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from abacus_ray import storage

# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime, etime (float),
# utime, stime, mem, io, rw, minflt, majflt, swaps (comp_t each), comm[16]; 64 bytes.
RECORD = struct.Struct("<BBHIIIIIIf8H16s")
AHZ = 100  # the accounting clock: ticks per second


def comp_t(value: int) -> int:
    """A 16-bit comp_t: 13-bit mantissa, 3-bit base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def read_records(path: Path) -> list[tuple[str, float, float]]:
    """(command name, CPU seconds, elapsed seconds) of every process in an accounting file."""
    data = path.read_bytes()
    out = []
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        fields = RECORD.unpack_from(data, offset)
        if fields[1] & 0x0F != 3:
            raise ValueError(f"{path}: record {offset // RECORD.size} is not an acct_v3 record")
        utime, stime = comp_t(fields[10]), comp_t(fields[11])
        name = fields[18].split(b"\0", 1)[0].decode(errors="replace")
        out.append((name, (utime + stime) / AHZ, fields[9] / AHZ))
    return out


def report(records: list[tuple[str, float, float]], top: int, wall: float | None) -> str:
    by_name: dict[str, list[float]] = defaultdict(list)
    for name, cpu, _ in records:
        by_name[name].append(cpu)
    total = sum(cpu for _, cpu, _ in records)
    lines = [f"{len(records)} processes, {total:.0f} CPU-seconds"]
    if wall:
        cores = os.cpu_count() or 1
        lines[0] += f" in {wall:.0f} s on {cores} cores: {100 * total / (wall * cores):.0f} % busy"
    lines.append(f"{'CPU-s':>8} {'share':>6} {'procs':>6} {'each':>6}  name")
    sums = {name: sum(cpus) for name, cpus in by_name.items()}
    for name in sorted(sums, key=lambda n: -sums[n])[:top]:
        share = 100 * sums[name] / total if total else 0.0
        lines.append(f"{sums[name]:8.1f} {share:5.1f}% {len(by_name[name]):6d} {sums[name] / len(by_name[name]):6.1f}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=25, help="how many process names to list (default 25)")
    parser.add_argument("--file", type=Path, help="keep the accounting file here (default: a temporary one)")
    parser.add_argument("--read", type=Path, help="only read an accounting file written earlier")
    parser.add_argument("command", nargs="*", help="the command to run, after `--`")
    args = parser.parse_args(argv)
    if args.read:
        try:
            print(report(read_records(args.read), args.top, None))
        except (OSError, ValueError) as e:
            print(f"suite_cpu: {args.read}: {e.strerror if isinstance(e, OSError) else e}", file=sys.stderr)
            return 2
        return 0
    if not args.command:
        parser.error("give a command after `--`, or --read FILE")
    accton = shutil.which("accton")
    if accton is None or os.geteuid() != 0:
        print("suite_cpu: needs root and `accton` (apt-get install acct)", file=sys.stderr)
        return 2
    if args.file is None:
        fd, name = tempfile.mkstemp(prefix="acct-", suffix=".bin")
        os.close(fd)
        path = Path(name)
    else:
        path = args.file
        try:
            storage.write_bytes(storage.on_disk(path), b"")  # accton appends to an empty file
        except OSError as e:
            print(f"suite_cpu: {path}: {e.strerror}", file=sys.stderr)
            return 2
    subprocess.run([accton, str(path)], check=True, capture_output=True)
    t0 = time.monotonic()
    try:
        rc = subprocess.call(args.command)
    except OSError as e:
        print(f"suite_cpu: {args.command[0]}: {e.strerror}", file=sys.stderr)
        rc = 2
    finally:
        wall = time.monotonic() - t0
        subprocess.run([accton, "off"], check=True, capture_output=True)
    print(report(read_records(path), args.top, wall))
    if args.file is None:
        storage.delete(storage.on_disk(path), quiet=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
