"""Whole directories in a `Location`: `write_dir`, `upload`, `download` and `write_files`.

A directory written by `write_dir` (a checkpoint, a cached copy of one) is never seen half done, by
a different mechanism on each backend:

* a local disk (or a mount): the directory is filled beside its target, fsynced and renamed into
  place (an old one renamed aside first, then removed): a reader sees the old directory or the new
  one, and for the instant between the two renames none;
* an object store, which has no rename: each write uploads its files under a fresh version prefix
  inside the directory (`.abacus-ray-versions/ID/`), then writes the directory's manifest,
  `MANIFEST` inside it, which names that version and lists each file with its size and sha256: the
  one PUT that publishes the new version whole. `last` (a checkpoint's meta.json), for its waiters
  at the directory's top level, is removed just before that PUT and copied from the new version
  after it (unless another writer's manifest came in between), so that it never sits beside
  another version; then the version the write replaced is removed. A
  reader follows the manifest only: it gets the old version whole until the manifest changes, the
  new one whole after, or a `FileNotFoundError` (interrupted first write, deleted, or changed
  while it was read), never a mix. Two writers at once each upload their own version; the manifest
  written last wins whole (the other version is left unreferenced until the directory is deleted).
  A crash before the manifest leaves the old version readable (or, for a first write, the
  directory absent: a version prefix without a manifest is never read). `delete` removes the
  waiters' `last` first, then the manifest, then the objects: a crash part way leaves a directory
  that reads as absent. A reader that waits for `last` (`list_checkpoints` waits for meta.json)
  sees only finished directories. Single files read one by one (`read_bytes` of `dir/meta.json`)
  are each whole but are not checked against the manifest.

A directory on an object store without a manifest (Ray Train's own checkpoints, a plain `upload`)
is downloaded as it is; one that holds a version prefix but no manifest reads as absent.
Directories written before versions (the manifest's files at the top level) are still read.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from abacus_ray.storage.files import (
    VERSIONS,
    listdir,
    missing_dirs,
    naming_full_disk,
    read_bytes,
    remove_empty,
    write_bytes,
)
from abacus_ray.storage.files import (
    delete as delete_entry,
)
from abacus_ray.storage.location import Location

Built = TypeVar("Built")

MANIFEST = ".abacus-ray-dir.json"  # an object-store directory's point of publication (see above)
WRITING, COMPLETE = "writing", "complete"
READ_ATTEMPTS = 3  # a download that met a directory changing under it reads its manifest again
MAX_MANIFEST_BYTES = 16 << 20
CHUNK = 8 << 20


def write_files(loc: Location, files: Mapping[str, bytes | str]) -> Location:
    """Several files of one directory (e.g. a site's pages), each written whole and atomically, in
    order (not the directory as a whole: a reader may see some pages new and others old)."""
    for name, data in files.items():
        write_bytes(loc / name, data.encode() if isinstance(data, str) else data)
    return loc


def write_dir(loc: Location, files: Mapping[str, bytes | str] | None = None, *,
              fill: Callable[[Path], None] | None = None, replace: bool = True,
              last: str | None = None) -> Location:
    """Write a whole directory: `files` (name -> content) and whatever `fill(tmp)` writes into a
    fresh local directory, which then takes `loc`'s place (how, on each backend: the module
    docstring).

    `replace=False`: a finished directory already at `loc` (another process's identical copy
    that got there first) is kept and this one dropped, on both backends. `last`: a top-level file
    written after all the others (on an object store, after the manifest), for its waiters.
    """
    if not loc.local:
        if not replace and _finished(loc):
            return loc
        with tempfile.TemporaryDirectory(prefix="abacus-ray-dir-") as tmp:
            _fill(Path(tmp), files, fill)
            _publish(Path(tmp), loc, last)
        return loc
    path = Path(loc.path)
    tmp = path.parent / f".tmp-{path.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    made = missing_dirs(path.parent)
    try:
        with naming_full_disk(path):  # a full disk names the directory asked for, not the temporary
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.mkdir()
            _fill(tmp, files, fill)
            _fsync_files(tmp)
        _swap_in(tmp, path, replace)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(made)  # nothing of a failed write is left, the directories made for it neither
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return loc


def upload(local_dir: Path, loc: Location, *, last: str | None = None) -> Location:
    """Copy a local directory's files to `loc` (a directory there). With `last` (a checkpoint's
    meta.json) the copy is a whole directory as `write_dir` writes one (replacing what is there);
    without, a plain recursive copy, each file whole."""
    if last is None or not (local_dir / last).is_file():
        pafs.copy_files(str(local_dir), loc.path, source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=loc.fs)
        return loc
    if not loc.local:
        _publish(local_dir, loc, last)
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


def download(loc: Location, local_dir: Path) -> Path:
    """Copy the directory `loc` into `local_dir` (created). A directory with a manifest (object
    store): exactly the files it lists, each checked; `FileNotFoundError` if it is being written,
    was interrupted, or kept changing while it was read."""
    os.makedirs(local_dir, exist_ok=True)
    manifest = None if loc.local else _manifest(loc)
    if manifest is None and (loc.local or not _has_versions(loc)):
        pafs.copy_files(loc.path, str(local_dir), source_filesystem=loc.fs,
                        destination_filesystem=pafs.LocalFileSystem())
        return local_dir
    for attempt in range(READ_ATTEMPTS):
        if manifest is None or manifest.get("state") != COMPLETE:
            break
        if _copy_listed(_version_dir(loc, manifest), manifest["files"], local_dir):
            return local_dir
        time.sleep(0.2 * (attempt + 1))
        manifest = _manifest(loc)
    raise FileNotFoundError(2, "an incomplete directory (being written, interrupted, or changed "
                            "while it was read)", loc.uri)


def _manifest(loc: Location) -> dict | None:
    """The directory's manifest (None: none there). One that is too large, not JSON, or lists a
    name outside the directory or an entry without size and sha256 reads as unreadable, so the
    directory counts as absent."""
    unreadable = {"state": "unreadable"}
    try:
        with loc.fs.open_input_stream((loc / MANIFEST).path) as fh:
            raw = fh.read(MAX_MANIFEST_BYTES + 1)
        data = json.loads(raw)
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return unreadable
    if len(raw) > MAX_MANIFEST_BYTES or not isinstance(data, dict):
        return unreadable
    if data.get("state") == COMPLETE and not _well_formed(data.get("files")):
        return unreadable
    version = data.get("version")
    if version is not None and not (isinstance(version, str) and version.isalnum()):
        return unreadable
    return data


def _version_dir(loc: Location, manifest: Mapping) -> Location:
    """Where the manifest's files are: its version's prefix (the directory itself for a manifest
    written before versions)."""
    version = manifest.get("version")
    return loc if version is None else loc / VERSIONS / version


def _has_versions(loc: Location) -> bool:
    """Any version prefix in the directory: one of ours, so without a manifest it is absent."""
    return loc.fs.get_file_info((loc / VERSIONS).path).type == pafs.FileType.Directory


def _well_formed(files: object) -> bool:
    """A manifest's file list: names inside the directory, each with a size and a sha256."""
    if not isinstance(files, dict):
        return False
    for name, entry in files.items():
        parts = PurePosixPath(name).parts
        if not parts or name.startswith("/") or any(p in ("..", ".") for p in parts) or \
                not isinstance(entry, dict) or not isinstance(entry.get("size"), int) or \
                not isinstance(entry.get("sha256"), str):
            return False
    return True


def _finished(loc: Location) -> bool:
    """A directory that `replace=False` keeps: published (manifest complete) or a plain one (no
    manifest, no version prefix)."""
    manifest = _manifest(loc)
    if manifest is not None:
        return manifest.get("state") == COMPLETE
    return (loc.fs.get_file_info(loc.path).type == pafs.FileType.Directory
            and not _has_versions(loc))


def _local_files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def _digest(path: Path) -> dict:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return {"size": path.stat().st_size, "sha256": digest.hexdigest()}


def _put(local: Path, loc: Location) -> None:
    """One file uploaded whole (one object)."""
    with open(local, "rb") as src, loc.fs.open_output_stream(loc.path) as dst:
        while chunk := src.read(CHUNK):
            dst.write(chunk)


def _publish(local_dir: Path, loc: Location, last: str | None) -> None:
    """Publish `local_dir`'s files as the object-store directory `loc`'s new version (the order:
    module docstring)."""
    files = _local_files(local_dir)
    listed = {name: _digest(path) for name, path in files.items()}
    before = _manifest(loc)  # the version this write replaces, removed once the new one is out
    version = uuid.uuid4().hex
    for name in sorted(files):
        _put(files[name], loc / VERSIONS / version / name)
    manifest = {"state": COMPLETE, "version": version, "files": listed, "last": last}
    if last is not None:  # its waiters never see one version's `last` beside another's files
        _delete_tree(loc / last)
    write_bytes(loc / MANIFEST, json.dumps(manifest, sort_keys=True).encode())
    if last in files:
        _copy_last(loc, last)
    if before is None or before.get("state") != COMPLETE:
        return
    if before.get("version") is not None:
        _delete_tree(loc / VERSIONS / before["version"])
        return
    for name in before["files"]:  # a version written before versions: its files at the top level
        if name != last:
            _delete_tree(loc / name)


def _copy_last(loc: Location, last: str) -> None:
    """Copy `last` from the published version to the top level, again while another writer's
    manifest came in meanwhile, so that it ends beside the version it belongs to."""
    for _ in range(READ_ATTEMPTS):
        now = _manifest(loc)
        if now is None or now.get("state") != COMPLETE or last not in now["files"]:
            return
        write_bytes(loc / last, read_bytes(_version_dir(loc, now) / last))
        if _manifest(loc) == now:
            return


def delete(loc: Location, *, quiet: bool = False) -> None:
    """Remove a file or a whole directory; nothing if it is not there. A published object-store
    directory goes in the order that never leaves a readable part: its `last` (what waiters look
    for), the manifest, then everything else. `quiet`: a failure to remove is ignored too (scratch
    space that the temp dir's own cleanup will reach)."""
    try:
        manifest = None if loc.local else _manifest(loc)
        if manifest is not None:
            last = manifest.get("last")
            if isinstance(last, str) and "/" not in last and last not in (".", ".."):
                _delete_tree(loc / last)
            _delete_tree(loc / MANIFEST)
    except (OSError, pa.ArrowException):
        if not quiet:
            raise
    delete_entry(loc, quiet=quiet)


def _delete_tree(loc: Location) -> None:
    """One object, or every object under a prefix (one DELETE each); nothing if none is there."""
    kind = loc.fs.get_file_info(loc.path).type
    if kind == pafs.FileType.File:
        loc.fs.delete_file(loc.path)
    elif kind == pafs.FileType.Directory:
        under = pafs.FileSelector(loc.path, recursive=True, allow_not_found=True)
        for info in sorted(loc.fs.get_file_info(under), key=lambda i: i.path):
            if info.type == pafs.FileType.File:
                loc.fs.delete_file(info.path)
        with contextlib.suppress(FileNotFoundError, OSError):
            loc.fs.delete_dir(loc.path)  # a directory marker, where the store keeps one


def _copy_listed(loc: Location, listed: Mapping[str, dict], local_dir: Path) -> bool:
    """Copy the listed files into `local_dir`, each checked by size and sha256; False (and nothing
    of this attempt left) if one is missing or differs."""
    written = []
    try:
        for name, want in sorted(listed.items()):
            dest = local_dir / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            written.append(dest)
            digest, size = hashlib.sha256(), 0
            with loc.fs.open_input_stream((loc / name).path) as src, open(dest, "wb") as dst:
                while chunk := src.read(CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
                    dst.write(chunk)
            if size != want.get("size") or digest.hexdigest() != want.get("sha256"):
                raise FileNotFoundError(name)
    except (FileNotFoundError, pa.ArrowException):
        for path in written:
            path.unlink(missing_ok=True)
        return False
    return True


def _fill(tmp: Path, files: Mapping[str, bytes | str] | None,
          fill: Callable[[Path], None] | None) -> None:
    if fill is not None:
        fill(tmp)
    for name, data in (files or {}).items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        with open(tmp / name, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)


def _swap_in(tmp: Path, path: Path, replace: bool) -> None:
    """Rename the finished directory `tmp` to `path`; an existing `path` is replaced or (not
    `replace`) kept."""
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


def _fsync_files(root: Path) -> None:
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())


def create_dir(loc: Location, fill: Callable[[Path], None], flag: str = "") -> Location:
    """Create a directory that does not exist yet (or is empty), whole: `fill(tmp)` writes it
    beside its place, which it then takes by one rename. Another process that created it meanwhile
    wins: this one fails with a `FileExistsError` naming it (`flag` first) and leaves nothing, as
    does any failure (a full disk names `loc`); parent directories made for it are removed
    again. On an object store (no rename) a prefix that holds anything is refused, then the
    directory is uploaded."""
    pre = f"{flag}: " if flag else ""
    if not loc.local:
        if listdir(loc):
            raise FileExistsError(f"{pre}{loc.uri} exists and is not empty; choose a new directory")
        with tempfile.TemporaryDirectory(prefix="abacus-ray-dir-") as tmp:
            with naming_full_disk(loc.uri):
                fill(Path(tmp))
            upload(Path(tmp), loc)
        return loc
    path = Path(loc.path)
    made = missing_dirs(path.parent)
    tmp = path.parent / f".tmp-{path.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with naming_full_disk(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.mkdir()
            fill(tmp)
            _fsync_files(tmp)
        try:
            os.rename(tmp, path)  # fails on a directory that is not empty: another writer's
        except OSError as e:
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise FileExistsError(f"{pre}{path} exists and is not empty (written meanwhile by "
                                      "another process); choose a new directory") from None
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(made)
        raise
    return loc


def build_aside(out: Path, build: Callable[[Path], Built]) -> Built:
    """Run `build` on a copy of the local directory `out` made beside it (hard links, so a rebuild
    keeps whatever else `out` holds and rewrites only what it writes), then swap the copy in: a
    failure, a full disk included (named by `out`), leaves `out` as it was
    and no half-built copy."""
    tag = f"{out.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    stage, old = out.parent / f".tmp-{tag}", out.parent / f".old-{tag}"
    try:
        with naming_full_disk(out):
            if out.is_dir():
                shutil.copytree(out, stage, copy_function=os.link, symlinks=True)
            built = build(stage)
        if out.is_dir():
            os.rename(out, old)
        os.rename(stage, out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return built
