"""Whole directories on a real S3 server (SeaweedFS) under crashes and a second writer.

A directory is written, replaced and deleted through a file system that dies after its N-th PUT or
DELETE, for every N the operation has; after each crash a reader (the real file system) must see
the old directory whole, the new one whole, or none, as `storage/dirs.py` promises for that
operation, and the waiters' meta.json only beside the version it belongs to. A second writer run
between any two requests of the first leaves one of the two whole.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from s3server import s3_env_fixture, s3_fixture  # noqa: F401

from abacus_ray import storage
from abacus_ray.storage import dirs
from abacus_ray.storage.location import Location

pytestmark = pytest.mark.slow  # the S3 server: not test-fast

OLD = {"meta.json": b"old meta", "model.pt": b"old weights", "stale.txt": b"only in the old"}
NEW = {"meta.json": b"new meta", "model.pt": b"new weights", "sub/state.pt": b"new state"}


class Crash(Exception):
    """The writer dies here: nothing after this request reaches the store."""


class Requests(pafs.FileSystemHandler):
    """The real file system, with a hook before each PUT or DELETE (`on_write(n)`, n counted from
    0): it may raise `Crash` (the process dies) or run another writer (a race)."""

    def __init__(self, real: pafs.FileSystem, on_write: Callable[[int], None]) -> None:
        self.real, self.on_write, self.writes = real, on_write, 0

    def _write(self) -> None:
        self.on_write(self.writes)
        self.writes += 1

    def get_type_name(self): return "requests"
    def normalize_path(self, path): return self.real.normalize_path(path)
    def equals(self, other): return self is other
    def get_file_info(self, paths): return self.real.get_file_info(paths)
    def get_file_info_selector(self, sel): return self.real.get_file_info(sel)
    def open_input_stream(self, path): return self.real.open_input_stream(path)
    def open_input_file(self, path): return self.real.open_input_file(path)
    def create_dir(self, path, recursive): self.real.create_dir(path, recursive=recursive)
    def move(self, src, dest): raise NotImplementedError("an object store has no rename")
    def copy_file(self, src, dest): raise NotImplementedError
    def open_append_stream(self, path, metadata): raise NotImplementedError
    def delete_root_dir_contents(self): raise NotImplementedError
    def delete_dir_contents(self, path, missing_dir_ok=False): raise NotImplementedError

    def delete_dir(self, path):
        self._write()
        self.real.delete_dir(path)

    def delete_file(self, path):
        self._write()
        self.real.delete_file(path)

    def open_output_stream(self, path, metadata):
        self._write()  # the PUT itself happens when the stream closes, before the next request
        return self.real.open_output_stream(path, metadata=metadata)


def _through(loc: Location, on_write: Callable[[int], None]) -> tuple[Location, Requests]:
    handler = Requests(loc.fs, on_write)
    return Location(pafs.PyFileSystem(handler), loc.path, loc.uri), handler


def _seen(loc: Location) -> dict[str, bytes] | None:
    """What `download` gives (None: absent), checked against the waiters' meta.json: where that is
    there, the download holds the same meta.json."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            storage.download(loc, Path(tmp))
        except FileNotFoundError:
            got = None
        else:
            got = {p.relative_to(tmp).as_posix(): p.read_bytes()
                   for p in Path(tmp).rglob("*") if p.is_file()}
    if storage.exists(loc / "meta.json"):
        assert got is not None and got["meta.json"] == storage.read_bytes(loc / "meta.json")
    return got


def _crash_at(n: int) -> Callable[[int], None]:
    def hook(i: int) -> None:
        if i == n:
            raise Crash(f"killed before request {n}")
    return hook


OPERATIONS = {
    # name: (what the directory holds before, the operation, what a reader may see after a crash)
    "first write": (None, lambda loc: storage.write_dir(loc, NEW, last="meta.json"), (None, NEW)),
    "replace": (OLD, lambda loc: storage.write_dir(loc, NEW, last="meta.json"), (OLD, NEW)),
    "delete": (OLD, lambda loc: storage.delete(loc), (OLD, None)),
}


@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_a_crash_after_any_request_leaves_a_whole_directory_or_none(s3_env, operation):
    """Killed before each of its requests in turn, the operation leaves what the protocol allows;
    finished, the result; and the version a replace superseded is gone from the store."""
    before, act, allowed = OPERATIONS[operation]
    base = storage.resolve(s3_env.uri(f"crash-{operation.replace(' ', '-')}-{os.getpid()}"))
    counted = base / "count"
    if before is not None:
        storage.write_dir(counted, before, last="meta.json")
    through, handler = _through(counted, lambda i: None)
    act(through)
    total = handler.writes
    assert total >= 3 and _seen(counted) == allowed[1]
    for n in range(total):
        loc = base / f"at-{n}"
        if before is not None:
            storage.write_dir(loc, before, last="meta.json")
        through, _ = _through(loc, _crash_at(n))
        with pytest.raises(Crash):
            act(through)
        seen = _seen(loc)
        assert seen in allowed, f"{operation} killed before request {n} of {total}: {seen}"
        act(loc)  # run again to the end: the result, whatever the crash left behind
        assert _seen(loc) == allowed[1]
    if operation == "replace":
        versions = storage.listdir(counted / dirs.VERSIONS)
        assert len(versions) == 1  # the old version went once the new one was published


def test_two_writers_leave_one_version_whole(s3_env):
    """A second writer's whole replace run between any two requests of the first: the directory is
    then one of the two versions, never a mix and never absent."""
    a = {"meta.json": b"A meta", "model.pt": b"A weights"}
    b = {"meta.json": b"B meta", "model.pt": b"B weights", "extra.pt": b"B only"}
    base = storage.resolve(s3_env.uri(f"race-{os.getpid()}"))
    through, handler = _through(base / "count", lambda i: None)
    storage.write_dir(base / "count", OLD, last="meta.json")
    storage.write_dir(through, a, last="meta.json")
    for n in range(handler.writes):
        loc = base / f"at-{n}"
        storage.write_dir(loc, OLD, last="meta.json")

        def second_writer(i: int, n: int = n, loc: Location = loc) -> None:
            if i == n:
                storage.write_dir(loc, b, last="meta.json")

        storage.write_dir(_through(loc, second_writer)[0], a, last="meta.json")
        assert _seen(loc) in (a, b), f"the second writer before request {n}"


def test_a_plain_directory_and_one_written_before_versions_are_still_read(s3_env, tmp_path):
    """A directory without manifest (Ray's own upload) is copied as it is; a manifest without a
    version (the layout before versions) reads its files at the top level and is replaced whole."""
    import hashlib
    import json

    base = storage.resolve(s3_env.uri(f"layouts-{os.getpid()}"))
    storage.write_bytes(base / "plain" / "a.txt", b"a")
    assert _seen(base / "plain") == {"a.txt": b"a"}
    legacy = base / "legacy"
    for name, data in OLD.items():
        storage.write_bytes(legacy / name, data)
    files = {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
             for name, data in OLD.items()}
    storage.write_text(legacy / dirs.MANIFEST, json.dumps({"state": "complete", "files": files}))
    assert _seen(legacy) == OLD
    storage.write_dir(legacy, NEW, last="meta.json")
    assert _seen(legacy) == NEW
    assert not storage.exists(legacy / "stale.txt")  # the old layout's files went with it
    storage.write_bytes(base / "half" / dirs.VERSIONS / "abc" / "meta.json", b"x")
    assert _seen(base / "half") is None  # a version without a manifest: never read


def test_a_kept_copy_a_tampered_object_and_an_upload(s3_env, tmp_path):
    """`replace=False` keeps a published directory; an object changed under the manifest makes it
    absent (nothing of it copied); a local checkpoint uploaded with `last` is published whole."""
    loc = storage.resolve(s3_env.uri(f"kept-{os.getpid()}")) / "step-000000001"
    storage.write_dir(loc, NEW, last="meta.json")
    storage.write_dir(loc, {"meta.json": b"third"}, replace=False)
    assert _seen(loc) == NEW
    version = storage.listdir(loc / dirs.VERSIONS)[0]
    storage.write_bytes(version / "model.pt", b"changed")
    with pytest.raises(FileNotFoundError, match="incomplete directory"):
        storage.download(loc, tmp_path / "copy")
    assert list((tmp_path / "copy").iterdir()) == []
    (tmp_path / "up" / "sub").mkdir(parents=True)
    for name, data in OLD.items():
        (tmp_path / "up" / name).write_bytes(data)
    storage.upload(tmp_path / "up", loc, last="meta.json")
    assert _seen(loc) == OLD
