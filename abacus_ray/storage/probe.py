"""Storage checked before any work starts: `probe` a location (write, list, delete in seconds) and
`check_local_dir`; every failure is one `StorageError` line naming the flag and the URI.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from abacus_ray.storage.files import file_info, listdir, write_bytes
from abacus_ray.storage.location import PROBE_TIMEOUT_S, Location, StorageError, first_line, resolve
from abacus_ray.text import shorten


def probe(given: str, flag: str, *, write: bool = True) -> Location:
    """Resolve `given` (a path or URI from the command line) and `check_location` it: the one call
    that turns a location argument into a `Location`, refused in one line before any work starts."""
    return check_location(resolve(given, flag=flag), flag, write=write)


def check_location(loc: Location, flag: str, *, write: bool = True) -> Location:
    """Check, before any work starts, that `loc` can be written, listed and deleted (in seconds);
    with `write=False` (a reader: summary, dashboard) only that it can be listed.

    Every failure is one `StorageError` line naming `flag` and the URI: an unknown scheme, refused
    or missing credentials, an unreachable endpoint, a missing bucket, a read-only prefix. Nothing
    is left behind. Returns `loc` (with the normal, longer timeouts) for the real work.
    """
    if loc.local:
        if write:
            check_local_dir(Path(loc.path), flag)
        return loc
    quick = resolve(loc.uri, flag=flag, timeout=PROBE_TIMEOUT_S, retries=1)
    bucket = loc.path.split("/", 1)[0]
    try:
        kind = quick.fs.get_file_info(bucket).type
        if kind == pafs.FileType.NotFound:
            raise StorageError(f"{flag}: {loc.uri}: no bucket named {bucket!r} (create it first)")
        if file_info(quick).type == pafs.FileType.File:
            raise StorageError(f"{flag}: {loc.uri}: is a file, not a prefix")
        listdir(quick)  # reading works: a refused write below means a read-only prefix
        if not write:
            return loc
        marker = quick.join(f".abacus-ray-probe-{uuid.uuid4().hex[:12]}")
        try:
            write_bytes(marker, b"probe")
        except (pa.ArrowException, OSError) as e:
            if _explain(e).startswith("access denied"):
                raise StorageError(
                    f"{flag}: {loc.uri}: read-only: these credentials may list and read here but "
                    "not write (use a prefix they may write, or other credentials)"
                ) from None
            raise
        try:
            if marker.name not in {c.name for c in listdir(quick)}:
                raise StorageError(f"{flag}: {loc.uri}: a written object does "
                                   "not show in the listing")
        finally:
            quick.fs.delete_file(marker.path)
    except StorageError:
        raise
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"{flag}: {loc.uri}: {_explain(e)}") from None
    return loc


def check_local_dir(path: Path, flag: str) -> Path:
    """Refuse a local directory that cannot be created or written to; nothing is left behind (the
    test is a temporary directory made and removed in the nearest existing ancestor: it holds for
    root, read-only mounts and quotas alike)."""
    if path.exists() and not path.is_dir():
        raise StorageError(f"{flag}: {path} exists and is not a directory")
    parent = path
    while not parent.exists() and parent.parent != parent:
        if parent.is_symlink():  # a link to nothing: a loop, or a target that is gone
            raise StorageError(f"{flag}: cannot create {path}: {parent} is a symbolic link that "
                               "leads nowhere (a loop, or a target that does not exist)")
        parent = parent.parent
    if not parent.is_dir():
        raise StorageError(f"{flag}: cannot create {path}: {parent} is not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".abacus-ray-probe-", dir=parent))
    except OSError as e:
        raise StorageError(f"{flag}: {parent} is not writable ({e.strerror or e})") from None
    return path


def _explain(e: BaseException) -> str:
    """A pyarrow / AWS error in words a user can act on (the raw reason kept, shortened)."""
    text = first_line(e)
    if "NETWORK_CONNECTION" in text or "Could not connect" in text or "Could not resolve" in text:
        return (
            "cannot reach the endpoint ("
            f"{shorten(text[text.find('AWS Error'):] if 'AWS Error' in text else text, 160)})"
        )
    if "OAuth2 access token" in text:  # Google's client found no credentials it could use
        return ("no usable Google credentials (GOOGLE_APPLICATION_CREDENTIALS, `gcloud auth "
                "application-default login` or an instance's service account)")
    if (
        "ACCESS_DENIED" in text
        or "AccessDenied" in text
        or "SIGNATURE" in text
        or "InvalidAccessKeyId" in text
    ):
        return ("access denied: the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, "
                "~/.aws or the role) are missing, wrong, or may not write here")
    return f"not usable ({text})"
