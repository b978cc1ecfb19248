"""Reading and writing run data in a `Location`: single files and Parquet tables (whole directories:
`dirs`).

Every write of a file is atomic: on a local disk a temporary sibling, fsync, rename; on an object
store one PUT, which the store makes visible whole or not at all.

Only regular files are read as data, and their size is bounded before a byte is read
(`check_regular_file`): a FIFO, a device (a link to /dev/zero) or a socket under a data file's name
is refused without being opened for reading, and so is a file larger than its kind may be (a JSON
file `MAX_TEXT_BYTES`; a Parquet part or any other whole-file read, half of the memory available
now).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import json
import os
import posixpath
import resource
import shutil
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from abacus_ray.storage.location import Location, StorageError
from abacus_ray.text import one_line

# a JSON file of run data (config.json, meta.json, sweep.json): KB, at most MB
MAX_TEXT_BYTES = 16 << 20
# Inside an object-store directory: the prefix of its published versions (storage/dirs.py).
VERSIONS = ".abacus-ray-versions"
GROWTH_CHUNK = 1 << 20  # what a file that grew while read is read on in
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # no space, over quota, over the size limit
KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
         stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}


def file_info(loc: Location) -> pafs.FileInfo:
    return loc.fs.get_file_info(loc.path)


def exists(loc: Location) -> bool:
    return file_info(loc).type != pafs.FileType.NotFound


def is_file(loc: Location) -> bool:
    return file_info(loc).type == pafs.FileType.File


def is_dir(loc: Location) -> bool:
    """A directory (on an object store: a prefix holding at least one object, or a bucket)."""
    return file_info(loc).type == pafs.FileType.Directory


def listdir(loc: Location) -> list[Location]:
    """The direct children of a directory, sorted by name (empty if it does not exist)."""
    infos = loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=False, allow_not_found=True))
    return sorted((loc.join(posixpath.basename(i.path)) for i in infos), key=lambda c: c.path)


def glob(loc: Location, pattern: str) -> list[Location]:
    """Entries directly in a directory whose name matches `pattern`, sorted (one listing: one LIST
    on a store). Directories that match are listed too, so that a reader can name them instead of
    missing them."""
    infos = loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=False, allow_not_found=True))
    names = sorted(posixpath.basename(i.path) for i in infos)
    return [loc.join(n) for n in names if fnmatch.fnmatchcase(n, pattern)]


def find(loc: Location, name: str) -> list[Location]:
    """Every file called `name` anywhere below a directory, sorted (one recursive listing); the
    copies inside an object-store directory's versions (`VERSIONS`) are not its files."""
    infos = loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True, allow_not_found=True))
    root = loc.path.rstrip("/") + "/"
    rel = sorted(i.path[len(root):] for i in infos
                 if i.type == pafs.FileType.File and posixpath.basename(i.path) == name
                 and i.path.startswith(root) and f"/{VERSIONS}/" not in f"/{i.path}")
    return [loc.join(r) for r in rel]


def not_a_file(path: Path | Location, missing: str, what: str) -> OSError:
    """The error for a file that is not where it should be: `PLACE: missing` (e.g. "no such problem
    file"), or, for a directory or another kind of file in its place (a FIFO, a device), what it is
    instead of `what` (e.g. "a problem file"). `path` is a `Path` for a file on this machine only
    (named as the user wrote it)."""
    if isinstance(path, Location):
        directory = is_dir(path)
    else:
        directory = path.is_dir()
        kind = _special_kind(str(path))
        if kind is not None and not directory:
            return OSError(f"{path}: {kind}, not {what} (only regular files are read)")
    if directory:
        return IsADirectoryError(f"{path}: is a directory, not {what}")
    return FileNotFoundError(f"{path}: {missing}")


def _special_kind(path: str) -> str | None:
    """What a local path is when it exists but is not a regular file or a
    directory (links followed)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return (
        None
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode)
        else KINDS.get(stat.S_IFMT(mode), "not a regular file")
    )


def memory_limit() -> int:
    """The most bytes one whole-file read may take: half of the memory this process may still
    take now, the least of what the machine has available, what its address-space limit
    (`ulimit -v`, a batch scheduler's `RLIMIT_AS`) leaves and what its cgroup's memory limit
    leaves."""
    room = [psutil.virtual_memory().available]
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        room.append(soft - psutil.Process().memory_info().vms)
    if (cgroup := _cgroup_room()) is not None:
        room.append(cgroup)
    return max(min(room), 0) // 2


def _cgroup_room() -> int | None:
    """Bytes the cgroup (v2, else v1) of this process may still charge, None where it sets no
    limit or none can be read."""
    for limit, used in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                        ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                         "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit) as a, open(used) as b:
                cap, now = a.read().strip(), b.read().strip()
        except OSError:
            continue
        if not cap.isdigit() or not now.isdigit() or int(cap) >= 1 << 60:  # "max": no limit
            return None
        return int(cap) - int(now)
    return None


def cpu_quota() -> float | None:
    """The CPUs this process's cgroup (v2, else v1) may use by its quota; None where it sets none
    or none can be read (the process's other limit beside `memory_limit`'s)."""
    for quota_file, period_file in (("/sys/fs/cgroup/cpu.max", None),
                                    ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
                                     "/sys/fs/cgroup/cpu/cpu.cfs_period_us")):
        try:
            with open(quota_file) as fh:
                words = fh.read().split()
            if period_file is not None:
                with open(period_file) as fh:
                    words += fh.read().split()
            quota, period = words[0], int(words[1])
        except (OSError, IndexError, ValueError):
            continue
        if quota == "max" or not quota.lstrip("-").isdigit() or int(quota) <= 0 or period <= 0:
            return None
        return int(quota) / period
    return None


def _too_big(loc: Location, size: int, limit: int | None) -> StorageError:
    bound = f"the {limit:,} bytes such a file may hold" if limit is not None else \
        f"half of this machine's available memory ({memory_limit():,} bytes)"
    return StorageError(f"{loc.uri}: {size:,} bytes, more than {bound}; not read")


def _check_mode(loc: Location, mode: int) -> None:
    if not stat.S_ISREG(mode):
        what = KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise StorageError(f"{loc.uri}: {what}, not a regular file; only regular "
                           "files are read as data")


def check_regular_file(loc: Location, limit: int | None = None) -> int:
    """The size of `loc` if it is a regular file (a link to one is followed) of at most `limit`
    bytes (None: `memory_limit()`), checked before it is opened; else one `StorageError` line
    naming it."""
    if loc.local:
        try:
            st = os.stat(loc.path)
        except FileNotFoundError:
            raise FileNotFoundError(2, "No such file", loc.uri) from None
        _check_mode(loc, st.st_mode)
        size = st.st_size
    else:
        info = file_info(loc)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(2, "No such file", loc.uri)
        if info.type != pafs.FileType.File:
            raise StorageError(f"{loc.uri}: a directory, not a regular file; only regular "
                               "files are read as data")
        size = info.size
    if size > (memory_limit() if limit is None else limit):
        raise _too_big(loc, size, limit)
    return size


def read_bytes(loc: Location, limit: int | None = None) -> bytes:
    """A whole regular file of at most `limit` bytes (None: `memory_limit()`); a local file is
    opened without blocking and checked on its open descriptor, so a FIFO put in its place is never
    waited on."""
    bound = memory_limit() if limit is None else limit
    if loc.local:
        try:
            fd = os.open(loc.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise FileNotFoundError(2, "No such file", loc.uri) from None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            _check_mode(loc, st.st_mode)
            if st.st_size > bound:
                raise _too_big(loc, st.st_size, limit)
            data = _read_sized(fh, st.st_size, bound)
    else:
        size = check_regular_file(loc, limit)
        try:
            with loc.fs.open_input_stream(loc.path) as fh:
                data = _read_sized(fh, size, bound)
        except FileNotFoundError:
            raise FileNotFoundError(2, "No such file", loc.uri) from None
    if len(data) > bound:  # it grew after the check
        raise _too_big(loc, len(data), limit)
    return data


def _read_sized(fh, size: int, bound: int) -> bytes:
    """What `fh` holds, asking for the `size` bytes it was found to hold plus one (a read asks its
    whole length of memory up front, so never `bound`); a file that grew meanwhile is read on in
    pieces, to at most `bound` + 1 bytes."""
    chunks = [fh.read(size + 1)]
    total = len(chunks[0])
    while size < total <= bound:
        more = fh.read(min(GROWTH_CHUNK, bound + 1 - total))
        if not more:
            break
        chunks.append(more)
        total += len(more)
    return b"".join(chunks) if len(chunks) > 1 else chunks[0]


def read_text(loc: Location, limit: int = MAX_TEXT_BYTES) -> str:
    """A whole text file (run data keeps JSON this way), at most `limit` bytes."""
    return read_bytes(loc, limit).decode()


def read_json(loc: Location, name: str | None = None, nan_ok: tuple[str, ...] = ()) -> dict:
    """A JSON object from a run-data file (`sweep.json`, `meta.json`, `config.json`): anything
    else (not JSON, not UTF-8, another JSON type, nested past the stack, a NaN or an infinity) is
    one ValueError naming `name` (default: the file). `nan_ok`: top-level keys whose non-finite
    value (an informational number older versions wrote so) is read as None."""
    name = name or loc.uri
    try:
        data = json.loads(read_text(loc), parse_constant=_NotANumber)
    # RecursionError: '[[[[...' nested past the stack
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"{name}: not valid JSON ({one_line(str(e), 200)})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{name}: expected a JSON object, found a JSON {type(data).__name__}")
    data = {k: (None if k in nan_ok and isinstance(v, _NotANumber) else v)
            for k, v in data.items()}
    found = _not_a_number(data)
    if found is not None:
        raise ValueError(f"{name}: not valid JSON ({found[0]} holds {found[1]}, which JSON has no "
                         "number for)")
    return data


class _NotANumber(str):
    """Python's json reads NaN and Infinity, which JSON has not: parsed into this marker."""


def _not_a_number(data: Any) -> tuple[str, str] | None:
    """The first key path holding a `_NotANumber` and its token (iterative: any depth json read),
    else None."""
    todo: list[tuple[str, Any]] = [("", data)]
    while todo:
        path, value = todo.pop()
        if isinstance(value, _NotANumber):
            return path or "the value", str(value)
        if isinstance(value, dict):
            todo += [(f"{path}.{k}" if path else str(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            todo += [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    return None


def disk_full(e: BaseException | None) -> OSError | None:
    """The full disk behind `e`, wherever in its chain it is and however a library words it (an
    OSError's errno, pyarrow's "[errno 28]" text, SQLite's "database or disk is full"), as an
    OSError with that errno; None if `e` is not about a full disk."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            return e
        text = str(e).lower()
        for code in DISK_FULL:
            if f"[errno {code}]" in text or os.strerror(code).lower() in text:
                return OSError(code, os.strerror(code))
        if "database or disk is full" in text:
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        e = e.__cause__ or e.__context__
    return None


@contextlib.contextmanager
def naming_full_disk(path: str | Path):  # a local path, or an object store's URI (only named)
    """A write that finds the disk full (no space, over quota, over the file size limit) fails with
    an OSError naming `path`, the place the caller was asked to write (the kernel's names none)."""
    try:
        yield
    except OSError as e:
        if e.errno in DISK_FULL:
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise


def free_bytes(loc: Location) -> int | None:
    """Bytes free on the disk that holds (or would hold) the local `loc`; None on an object store,
    which has no such number."""
    if not loc.local:
        return None
    here = Path(loc.path)
    while not here.exists() and here.parent != here:
        here = here.parent
    return shutil.disk_usage(here).free


def tree_bytes(loc: Location) -> int:
    """Bytes of the regular files under a local directory (links not followed; 0 where missing)."""
    root = Path(loc.path)
    if not loc.local or not root.is_dir():
        return 0
    return sum(f.lstat().st_size for f in root.rglob("*") if f.is_file() and not f.is_symlink())


def missing_dirs(path: str | Path) -> list[Path]:
    """The directories that `os.makedirs(path)` would create, innermost first."""
    path = Path(path)
    return [p for p in (path, *path.parents) if not p.exists()]


def remove_empty(dirs: list[Path]) -> None:
    """Remove each of `dirs` (innermost first) that is still empty: what a failed write created."""
    for d in dirs:
        with contextlib.suppress(OSError):
            d.rmdir()


TMP_PREFIX = ".tmp-"  # a write in progress: a dot-file no reader lists


def _tmp_sibling(path: str) -> str:
    return posixpath.join(
        posixpath.dirname(path), f"{TMP_PREFIX}{uuid.uuid4().hex[:12]}-{posixpath.basename(path)}"
    )


def write_bytes(loc: Location, data: bytes) -> Location:
    """Write a whole file atomically: on a local disk a temporary sibling, fsync, rename; on an
    object store one PUT (visible whole or not at all)."""
    if loc.local:
        made = missing_dirs(posixpath.dirname(loc.path))
        tmp = _tmp_sibling(loc.path)
        try:
            with naming_full_disk(loc.path):
                os.makedirs(posixpath.dirname(loc.path), exist_ok=True)
                with open(tmp, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
            os.replace(tmp, loc.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            remove_empty(made)  # a failed write leaves no directory it made either
            raise
        return loc
    with loc.fs.open_output_stream(loc.path) as fh:
        fh.write(data)
    return loc


def write_stream(path: Path, write: Callable[[Any], None]) -> None:
    """One file of a directory `write_dir` is filling (its `fill`'s temporary directory), written
    by `write(fh)` straight into the file, so a large object (torch.save of a model) is never held
    twice in memory. A failed write raises the OSError it was, with its errno, whatever the library
    made of it (torch's zip writer reports no space left as a RuntimeError about the stream)."""
    errors: list[OSError] = []
    with open(path, "wb") as fh:

        def _keeping(data: bytes) -> int:
            try:
                return fh.write(data)
            except OSError as e:
                errors.append(e)
                raise

        try:
            write(SimpleNamespace(write=_keeping, flush=fh.flush, name=fh.name))
        except Exception:
            if errors:
                raise errors[0] from None
            raise


def write_text(loc: Location, text: str) -> Location:
    return write_bytes(loc, text.encode())


def write_csv(loc: Location, table: Any, *, index: bool = False) -> Location:
    """A pandas DataFrame as a CSV file, atomically (`write_bytes`)."""
    return write_text(loc, table.to_csv(index=index))


def delete(loc: Location, *, quiet: bool = False) -> None:
    """Remove a file or a whole directory; nothing if it is not there. `quiet`: a failure to remove
    is ignored too (scratch space that the temp dir's own cleanup will reach)."""
    try:
        kind = file_info(loc).type
        if kind == pafs.FileType.Directory:
            loc.fs.delete_dir(loc.path)
        elif kind == pafs.FileType.File:
            loc.fs.delete_file(loc.path)
    except (OSError, pa.ArrowException):
        if not quiet:
            raise


def copy_file(source: Location, target: Location) -> Location:
    """One file copied whole and atomically (`write_bytes`), e.g. a page's script into a site."""
    return write_bytes(target, read_bytes(source))


class NotParquetError(StorageError):
    """A regular file of a bounded size that is not Parquet (truncated, or garbage): a results
    reader may skip it as unreadable, where a special or oversized file is refused."""


def check_parquet_file(loc: Location) -> int:
    """`check_regular_file`, and on a local disk the Parquet magic number at both ends (two 4-byte
    reads), so that a sparse multi-GB file under a part's name is refused before it is read."""
    size = check_regular_file(loc)
    if loc.local:
        with open(loc.path, "rb") as fh:
            head = fh.read(4)
            fh.seek(max(size - 4, 0))
            tail = fh.read(4)
        if size < 12 or head != b"PAR1" or tail != b"PAR1":
            raise NotParquetError(f"{loc.uri}: not a Parquet file ({size:,} bytes without its "
                                  "PAR1 magic number at both ends); not read")
    return size


def read_parquet_schema(loc: Location) -> pa.Schema:
    check_parquet_file(loc)
    return pq.read_schema(loc.path, filesystem=loc.fs)


def read_parquet(loc: Location, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file (a regular file that fits in memory), or every part
    of a directory of them."""
    if file_info(loc).type == pafs.FileType.Directory:
        for part in loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True)):
            if part.type != pafs.FileType.Directory and not posixpath.basename(
                part.path
            ).startswith((".", "_")):
                check_parquet_file(loc.at(part.path))
    else:
        check_parquet_file(loc)
    return pq.read_table(loc.path, columns=columns, filesystem=loc.fs)


def open_parquet(loc: Location) -> pq.ParquetFile:
    """One Parquet file read whole (one GET on an object store), its schema and columns then read
    from memory: a reader can check the schema before choosing the columns without a second
    request."""
    if loc.local:
        check_parquet_file(loc)
    return pq.ParquetFile(pa.BufferReader(read_bytes(loc)))


def write_parquet(loc: Location, table: pa.Table) -> Location:
    """One Parquet file, atomically (`write_bytes`): serialised in memory, then one write."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return write_bytes(loc, sink.getvalue().to_pybytes())
