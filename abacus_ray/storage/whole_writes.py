"""A local file system for Ray Tune on which every file it writes appears whole or not at all.

Tune copies its experiment state (`experiment_state-*.json`, the searcher's `basic-variant-state-*`)
from its staging directory into the storage path every few seconds, and `pyarrow.fs.copy_files`
writes a local destination in place. A driver killed during that copy left a truncated state file;
`Tuner.restore` then failed to read it, Tune silently started the experiment over, and the rerun
died inside Tune's searcher (`KeyError: 'run'`) instead of resuming. On object storage a PUT is
already whole; on a local path this handler gives Tune the same: a file is written under a hidden
temporary name beside its target and renamed over it when closed, so a killed writer leaves the
previous version (or nothing) and a `.tmp-` file that no reader lists.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.fs as pafs

from abacus_ray.storage.files import TMP_PREFIX, _tmp_sibling
from abacus_ray.storage.location import Location

__all__ = ["TMP_PREFIX", "WholeWrites", "tune_storage", "whole_writes_fs"]


class _WholeFile:
    """A writable file that becomes `target` only when closed."""

    def __init__(self, target: str) -> None:
        self.target, self.tmp = target, _tmp_sibling(target)  # as every write of storage
        self.file = open(self.tmp, "wb")  # noqa: SIM115 - closed (and renamed) by close()
        self.closed = False

    def write(self, data) -> int:
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()

    def tell(self) -> int:
        return self.file.tell()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.file.close()
            os.replace(self.tmp, self.target)
        except BaseException:
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)
            raise


class WholeWrites(pafs.FileSystemHandler):
    """The local file system, every output stream written whole (`_WholeFile`); all else as is."""

    def __init__(self) -> None:
        self.fs = pafs.LocalFileSystem()

    def __eq__(self, other) -> bool:
        return isinstance(other, WholeWrites)

    def __ne__(self, other) -> bool:
        return not self == other

    def __reduce__(self):  # Ray ships the file system to its trial actors
        return WholeWrites, ()

    def get_type_name(self) -> str:
        return "abacus-whole-writes"

    def normalize_path(self, path: str) -> str:
        return self.fs.normalize_path(path)

    def get_file_info(self, paths):
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.fs.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise OSError("refusing to delete the contents of /")

    def delete_file(self, path: str) -> None:
        self.fs.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.fs.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        with self.fs.open_input_stream(src) as source, self.open_output_stream(dest, None) as out:
            while chunk := source.read(1 << 24):
                out.write(chunk)

    def open_input_stream(self, path: str):
        return self.fs.open_input_stream(path)

    def open_input_file(self, path: str):
        return self.fs.open_input_file(path)

    def open_output_stream(self, path: str, metadata):
        return pa.PythonFile(_WholeFile(path), mode="w")

    def open_append_stream(self, path: str, metadata):
        return self.fs.open_append_stream(path)


def whole_writes_fs() -> pafs.FileSystem:
    """The local file system for Ray Tune's `storage_filesystem` (see the module's docstring)."""
    return pafs.PyFileSystem(WholeWrites())


def tune_storage(loc: Location) -> tuple[str, pafs.FileSystem]:
    """`(storage_path, storage_filesystem)` for a Tune run's own state under `loc`: on a local path
    this file system, each file whole; on an object store its own."""
    return loc.path, whole_writes_fs() if loc.local else loc.fs
