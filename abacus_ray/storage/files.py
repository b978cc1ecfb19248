"""Reading and writing run data in a `Location`: files, Parquet tables and whole directories.

Every write is atomic: on a local disk a temporary sibling, fsync, rename (a directory: written whole
beside its target, then swapped in); on an object store one PUT per file, which the store makes
visible whole or not at all (a directory's marker file last).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import shutil
import tempfile
import uuid
from collections.abc import Callable, Mapping
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


def upload(local_dir: str | Path, target, *, last: str | None = None) -> Location:
    """Copy a local directory's files to `target` (a directory there). `last`: a top-level file copied
    only after all the others, so that a reader who waits for it (a checkpoint's meta.json) sees a whole
    directory."""
    loc = resolve(target)
    local_dir = Path(local_dir)
    if last is None or not (local_dir / last).is_file():
        pafs.copy_files(str(local_dir), loc.path, source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=loc.fs)
        return loc
    for child in sorted(local_dir.iterdir()):
        if child.name == last:
            continue
        if child.is_dir():
            upload(child, loc / child.name)
        else:
            write_bytes(loc / child.name, child.read_bytes())
    write_bytes(loc / last, (local_dir / last).read_bytes())
    return loc


def download(target, local_dir: str | Path) -> Path:
    """Copy a directory of `target`'s file system into `local_dir` (created)."""
    loc = resolve(target)
    os.makedirs(local_dir, exist_ok=True)
    pafs.copy_files(loc.path, str(local_dir), source_filesystem=loc.fs, destination_filesystem=pafs.LocalFileSystem())
    return Path(local_dir)


def write_files(directory, files: Mapping[str, bytes | str]) -> Location:
    """Several files of one directory (e.g. a site's pages), each written whole and atomically, in order."""
    loc = resolve(directory)
    for name, data in files.items():
        write_bytes(loc / name, data.encode() if isinstance(data, str) else data)
    return loc


def write_dir(target, files: Mapping[str, bytes | str] | None = None, *, fill: Callable[[Path], None] | None = None,
              replace: bool = True, last: str | None = None) -> Location:
    """Write a whole directory atomically: `files` (name -> content) and whatever `fill(tmp)` writes into a
    fresh local directory, which then takes `target`'s place, so that a reader sees the old directory or
    the new one, never part of one (a checkpoint, a cached copy of one).

    On a local disk the files are fsynced, the directory renamed into place (an old one renamed aside
    first, then removed) and the parent fsynced. `replace=False`: a directory already at `target`
    (another process's identical copy that got there first) is kept and this one dropped. On an object
    store the directory is filled on this machine, then uploaded with `last` after every other file.
    """
    loc = resolve(target)
    if not loc.local:
        with tempfile.TemporaryDirectory(prefix="abacus-ray-dir-") as tmp:
            _fill(Path(tmp), files, fill)
            upload(tmp, loc, last=last)
        return loc
    path = Path(loc.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{path.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        _fill(tmp, files, fill)
        for f in sorted(p for p in tmp.rglob("*") if p.is_file()):
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        _swap_in(tmp, path, replace)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return loc


def _fill(tmp: Path, files: Mapping[str, bytes | str] | None, fill: Callable[[Path], None] | None) -> None:
    if fill is not None:
        fill(tmp)
    for name, data in (files or {}).items():
        with open(tmp / name, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)


def _swap_in(tmp: Path, path: Path, replace: bool) -> None:
    """Rename the finished directory `tmp` to `path`; an existing `path` is replaced or (not `replace`) kept."""
    if path.exists():
        if not replace:
            return
        trash = path.parent / f".old-{path.name}-{uuid.uuid4().hex[:8]}"
        os.rename(path, trash)
        os.rename(tmp, path)
        shutil.rmtree(trash, ignore_errors=True)
        return
    try:
        os.rename(tmp, path)
    except OSError:
        if replace or not path.is_dir():  # not another writer's copy that won the rename
            raise
