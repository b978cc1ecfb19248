"""Reading and writing run data in a `Location`: single files and Parquet tables (whole directories:
`dirs`).

Every write of a file is atomic: on a local disk a temporary sibling, fsync, rename; on an object store
one PUT, which the store makes visible whole or not at all.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from abacus_ray.storage.location import Location, is_uri, resolve


def file_info(loc: Location) -> pafs.FileInfo:
    return loc.fs.get_file_info(loc.path)


def exists(target) -> bool:
    loc = resolve(target)
    return file_info(loc).type != pafs.FileType.NotFound


def is_file(target) -> bool:
    return file_info(resolve(target)).type == pafs.FileType.File


def is_dir(target) -> bool:
    """A directory (on an object store: a prefix holding at least one object, or a bucket)."""
    loc = resolve(target)
    return file_info(loc).type == pafs.FileType.Directory


def listdir(target) -> list[Location]:
    """The direct children of a directory, sorted by name (empty if it does not exist)."""
    loc = resolve(target)
    infos = loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=False, allow_not_found=True))
    return sorted((loc.join(posixpath.basename(i.path)) for i in infos), key=lambda c: c.path)


def glob(target, pattern: str) -> list[Location]:
    """Entries directly in a directory whose name matches `pattern`, sorted (one listing: one LIST on a
    store). Directories that match are listed too, so that a reader can name them instead of missing them."""
    loc = resolve(target)
    infos = loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=False, allow_not_found=True))
    names = sorted(posixpath.basename(i.path) for i in infos)
    return [loc.join(n) for n in names if fnmatch.fnmatchcase(n, pattern)]


def find(target, name: str) -> list[Location]:
    """Every file called `name` anywhere below a directory, sorted (one recursive listing)."""
    loc = resolve(target)
    infos = loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True, allow_not_found=True))
    root = loc.path.rstrip("/") + "/"
    rel = sorted(i.path[len(root):] for i in infos
                 if i.type == pafs.FileType.File and posixpath.basename(i.path) == name and i.path.startswith(root))
    return [loc.join(r) for r in rel]


def not_a_file(target: str | Path | Location, missing: str, what: str) -> OSError:
    """The error for a file that is not where it should be: `TARGET: missing` (e.g. "no such problem file"),
    or, for a directory in its place, that it is a directory and not `what` (e.g. "a problem file")."""
    if is_uri(target) or isinstance(target, Location):
        directory = is_dir(target)
    else:
        directory = Path(target).is_dir()
    if directory:
        return IsADirectoryError(f"{target}: is a directory, not {what}")
    return FileNotFoundError(f"{target}: {missing}")


def read_bytes(target) -> bytes:
    loc = resolve(target)
    try:
        with loc.fs.open_input_stream(loc.path) as fh:
            return fh.read()
    except FileNotFoundError:
        raise FileNotFoundError(2, "No such file", loc.uri) from None


def read_text(target) -> str:
    return read_bytes(target).decode()


def _tmp_sibling(path: str) -> str:
    return posixpath.join(posixpath.dirname(path), f".tmp-{uuid.uuid4().hex[:12]}-{posixpath.basename(path)}")


def write_bytes(target, data: bytes) -> Location:
    """Write a whole file atomically: on a local disk a temporary sibling, fsync, rename; on an object
    store one PUT (visible whole or not at all)."""
    loc = resolve(target)
    if loc.local:
        os.makedirs(posixpath.dirname(loc.path), exist_ok=True)
        tmp = _tmp_sibling(loc.path)
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, loc.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return loc
    with loc.fs.open_output_stream(loc.path) as fh:
        fh.write(data)
    return loc


def write_text(target, text: str) -> Location:
    return write_bytes(target, text.encode())


def delete(target, *, quiet: bool = False) -> None:
    """Remove a file or a whole directory; nothing if it is not there. `quiet`: a failure to remove is
    ignored too (scratch space that the temp dir's own cleanup will reach)."""
    loc = resolve(target)
    try:
        kind = file_info(loc).type
        if kind == pafs.FileType.Directory:
            loc.fs.delete_dir(loc.path)
        elif kind == pafs.FileType.File:
            loc.fs.delete_file(loc.path)
    except (OSError, pa.ArrowException):
        if not quiet:
            raise


def copy_file(source: str | Path, target) -> Location:
    """One file copied whole and atomically (`write_bytes`), e.g. a page's script into a site."""
    return write_bytes(target, read_bytes(source))


def read_parquet_schema(target) -> pa.Schema:
    loc = resolve(target)
    return pq.read_schema(loc.path, filesystem=loc.fs)


def read_parquet(target, columns=None) -> pa.Table:
    loc = resolve(target)
    return pq.read_table(loc.path, columns=columns, filesystem=loc.fs)


def open_parquet(target) -> pq.ParquetFile:
    """One Parquet file read whole (one GET on an object store), its schema and columns then read from
    memory: a reader can check the schema before choosing the columns without a second request."""
    return pq.ParquetFile(pa.BufferReader(read_bytes(target)))


def write_parquet(target, table: pa.Table) -> Location:
    """One Parquet file, atomically (`write_bytes`): serialised in memory, then one write."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return write_bytes(target, sink.getvalue().to_pybytes())
