"""Where everything a run keeps lives: a local path or an object-store URI, through `pyarrow.fs`.

One owner of storage for the whole package (docs/guide.md, "Cluster without a shared file system").
A `--storage`, `--out`, RESULTS or checkpoint argument is parsed once into a `Location`: a
`pyarrow.fs.FileSystem`, the path inside it and the URI it came from (for messages). Accepted forms:

* a local path or `file:///abs/path`: `LocalFileSystem`; writes are a temporary file + rename;
* `s3://bucket/prefix`: `S3FileSystem` with AWS credentials from the standard chain (variables
  `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`, `~/.aws` files, an instance
  role); an S3-compatible endpoint (SeaweedFS, MinIO, Ceph) from `AWS_ENDPOINT_URL` (or
  `AWS_ENDPOINT_URL_S3`) or from the URI's query, `?endpoint_override=host:port&scheme=http`
  (also `region`). A write is one PUT, which an object store makes visible whole or not at all;
* `gs://bucket/prefix`: pyarrow's `GcsFileSystem` (Google's default credentials; not tested live).

Credentials are never part of a URI (`s3://KEY:SECRET@...` and `?secret_key=` are refused), so no
message, `sweep.json` or results column can carry them; a pickled `S3FileSystem` (what Ray ships to
its workers) holds the endpoint but no key: every process reads the credentials from its own
environment.

The API, all taking a `Location` or anything `resolve` accepts:

    loc = resolve("s3://bkt/runs?endpoint_override=127.0.0.1:8333&scheme=http")
    probe(uri, "--storage") -> Location        # small write/list/delete; one-line StorageError
    local_path(uri, "--problems", "a problem file") -> Path   # this machine's files only, else refused
    not_a_file(path, "missing", "a problem file")           # the error for a missing file (or a directory)
    loc / "fig10_k" / "sweep.json"             # join (also loc.join(*parts)); str(loc) is the URI
    exists, is_file, is_dir, listdir, glob(loc, "part-*.parquet"), find(loc, "meta.json")
    read_bytes, read_text, write_bytes, write_text (atomic), delete
    read_parquet, read_parquet_schema, write_parquet (atomic)
    upload(local_dir, loc), download(loc, local_dir)   # whole directories (pyarrow.fs.copy_files)

`StorageError` is a `ValueError`: the command line prints it as one line and exits 2.
"""

from __future__ import annotations

import datetime
import fnmatch
import hashlib
import os
import posixpath
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

SCHEMES = ("file", "s3", "gs")
S3_QUERY = ("endpoint_override", "scheme", "region")  # what an s3:// URI may carry; never credentials
GCS_QUERY = ("endpoint_override", "scheme", "default_bucket_location")
CONNECT_TIMEOUT_S = 5.0  # an unreachable endpoint fails in seconds, not after the SDK's long retries
REQUEST_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 3.0
RETRIES = 3  # attempts per request; the probe makes one


class StorageError(ValueError):
    """Storage that cannot be used, in one line naming its URI (never a credential)."""


@dataclass(frozen=True)
class Location:
    """A place in some file system: `fs` and the `path` inside it; `uri` is what a user would type."""

    fs: pafs.FileSystem
    path: str
    uri: str

    @property
    def local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    @property
    def parent(self) -> Location:
        return Location(self.fs, posixpath.dirname(self.path.rstrip("/")), _uri_dirname(self.uri))

    def at(self, path: str) -> Location:
        """Another path of the same file system (e.g. a path Ray reports back), as a `Location`."""
        path = path.rstrip("/")
        if self.local:
            return Location(self.fs, path, path)
        base, query = _split_query(self.uri)
        return Location(self.fs, path, f"{base.split('://', 1)[0]}://{path}{query}")

    @property
    def ray_storage(self) -> tuple[str, pafs.FileSystem | None]:
        """`(storage_path, storage_filesystem)` for Ray Tune / Train's `RunConfig` (a local path needs no fs)."""
        return self.path, None if self.local else self.fs

    def join(self, *parts: str) -> Location:
        path, uri = self.path, self.uri
        for part in parts:
            for piece in str(part).split("/"):
                if piece in ("", "."):
                    continue
                path = posixpath.join(path, piece)
                uri = _uri_join(uri, piece)
        return Location(self.fs, path, uri)

    @property
    def suffix(self) -> str:
        return posixpath.splitext(self.name)[1]

    def __fspath__(self) -> str:
        """A local location is path-like (`open`, `Path`, `pq.read_table` take it); a remote one is not."""
        if not self.local:
            raise TypeError(f"{self.uri}: not a local path")
        return self.path

    def __truediv__(self, part: str) -> Location:
        return self.join(part)

    def __str__(self) -> str:
        return self.uri

    def as_path(self) -> Path:
        """The local path (only for a local location)."""
        if not self.local:
            raise StorageError(f"{self.uri}: not a local path")
        return Path(self.path)


def _split_query(uri: str) -> tuple[str, str]:
    base, sep, query = uri.partition("?")
    return base, sep + query


def _uri_join(uri: str, piece: str) -> str:
    base, query = _split_query(uri)
    return f"{base.rstrip('/')}/{piece}{query}"


def _uri_dirname(uri: str) -> str:
    base, query = _split_query(uri)
    base = base.rstrip("/")
    if is_uri(base) and base.count("/") <= 2:  # a bucket has no parent
        return base + query
    return (base.rsplit("/", 1)[0] or "/") + query


def is_uri(text: str | Path) -> bool:
    """True for `scheme://...` (any scheme, known or not); a plain path otherwise."""
    return "://" in str(text)


def _endpoint_from_env() -> tuple[str | None, str | None]:
    """`AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` (the AWS CLI's and SDKs' variables) as (host:port, scheme)."""
    url = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if not url:
        return None, None
    parts = urlsplit(url if "://" in url else f"https://{url}")
    return parts.netloc, parts.scheme


def _s3(uri: str, bucket_path: str, query: dict[str, str], timeout: float, retries: int) -> pafs.FileSystem:
    bad = sorted(set(query) - set(S3_QUERY))
    if bad:
        what = "credentials belong in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or ~/.aws, not in the URI" \
            if any(k in ("access_key", "secret_key", "session_token") for k in bad) else \
            f"an s3:// URI takes only {', '.join(S3_QUERY)}"
        raise StorageError(f"{_safe(uri)}: unknown query parameter {bad[0]!r} ({what})")
    endpoint, scheme = _endpoint_from_env()
    kwargs: dict = {"endpoint_override": query.get("endpoint_override", endpoint),
                    "scheme": query.get("scheme", scheme or "https")}
    region = query.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        kwargs["region"] = region
    elif kwargs["endpoint_override"]:
        kwargs["region"] = "us-east-1"  # an S3-compatible server ignores it; no region lookup over the network
    return pafs.S3FileSystem(**{k: v for k, v in kwargs.items() if v is not None}, connect_timeout=min(timeout, 10),
                             request_timeout=timeout,
                             retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=retries))


def _gcs(uri: str, query: dict[str, str], timeout: float) -> pafs.FileSystem:
    """pyarrow's GCS file system (Google's default credentials), its retries bounded by `timeout`."""
    bad = sorted(set(query) - set(GCS_QUERY))
    if bad:
        raise StorageError(f"{uri}: unknown query parameter {bad[0]!r} (a gs:// URI takes only {', '.join(GCS_QUERY)})")
    return pafs.GcsFileSystem(retry_time_limit=datetime.timedelta(seconds=timeout), **query)


def _safe(uri: str) -> str:
    """The URI without any user:password part, for messages."""
    parts = urlsplit(uri)
    if "@" in parts.netloc:
        return uri.replace(parts.netloc, parts.netloc.rsplit("@", 1)[1], 1)
    return uri


def resolve(target: str | Path | Location, *, flag: str = "", timeout: float = REQUEST_TIMEOUT_S,
            retries: int = RETRIES) -> Location:
    """Parse a path or URI into a `Location` (no network access yet); `flag` prefixes error messages."""
    if isinstance(target, Location):
        return target
    text = str(target)
    pre = f"{flag}: " if flag else ""
    if not is_uri(text):
        path = os.path.abspath(os.path.expanduser(text)) if text else ""
        if not path:
            raise StorageError(f"{pre}empty path")
        return Location(pafs.LocalFileSystem(), path, path)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise StorageError(f"{pre}{_safe(text)}: unknown storage scheme {scheme + '://'!r}; use a local path, file://, "
                           "s3:// (AWS or an S3-compatible server) or gs://")
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or parts.query:
            raise StorageError(f"{pre}{text}: a file:// URI is file:///absolute/path")
        return Location(pafs.LocalFileSystem(), parts.path or "/", parts.path or "/")
    if "@" in parts.netloc:
        raise StorageError(f"{pre}{_safe(text)}: credentials in the URI are refused; set AWS_ACCESS_KEY_ID / "
                           "AWS_SECRET_ACCESS_KEY (or ~/.aws, an instance role) on every node instead")
    if not parts.netloc:
        raise StorageError(f"{pre}{text}: no bucket; write {scheme}://BUCKET/PREFIX")
    bucket_path = (parts.netloc + parts.path).rstrip("/")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    uri = f"{scheme}://{bucket_path}" + (f"?{parts.query}" if parts.query else "")
    try:
        fs = _s3(uri, bucket_path, query, timeout, retries) if scheme == "s3" else _gcs(uri, query, timeout)
    except StorageError as e:
        raise StorageError(pre + str(e)) from None
    except (pa.ArrowException, OSError, ValueError) as e:
        raise StorageError(f"{pre}{uri}: {_first_line(e)}") from None
    return Location(fs, bucket_path, uri)


def _first_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:240] or type(e).__name__


def driver_dir(loc: Location, name: str) -> Path:
    """A directory on this machine for what one run keeps beside `loc` but cannot put there (MLflow's
    SQLite store, the dashboard site): `loc/name` itself on a local disk, else
    `$ABACUS_RAY_HOME` (default `~/.abacus-ray`) `/<bucket-prefix>-<hash of the URI>/<name>`."""
    if loc.local:
        return Path(loc.path) / name
    home = Path(os.environ.get("ABACUS_RAY_HOME") or Path.home() / ".abacus-ray").expanduser()
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in loc.path)[:80]
    digest = hashlib.sha256(loc.uri.encode()).hexdigest()[:8]
    return home / f"{loc.uri.split('://', 1)[0]}-{slug}-{digest}" / name


def _info(loc: Location) -> pafs.FileInfo:
    return loc.fs.get_file_info(loc.path)


def exists(target) -> bool:
    loc = resolve(target)
    return _info(loc).type != pafs.FileType.NotFound


def is_file(target) -> bool:
    return _info(resolve(target)).type == pafs.FileType.File


def is_dir(target) -> bool:
    """A directory (on an object store: a prefix holding at least one object, or a bucket)."""
    loc = resolve(target)
    return _info(loc).type == pafs.FileType.Directory


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


def local_path(target: str | Path, flag: str, what: str) -> Path:
    """`target` (a path or a file:// URI) as a local path, for an input read on this machine only (a sweep
    file, a problem file, an official checkpoint); any other URI is refused in one line naming `flag`."""
    if not is_uri(target):
        return Path(target)
    loc = resolve(target, flag=flag)
    if not loc.local:
        raise StorageError(f"{flag}: {_safe(str(target))}: {what} is read from this machine's disk; copy it here "
                           "first (aws s3 cp, gcloud storage cp)")
    return Path(loc.path)


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


def delete(target) -> None:
    """Remove a file or a whole directory; nothing if it is not there."""
    loc = resolve(target)
    kind = _info(loc).type
    if kind == pafs.FileType.Directory:
        loc.fs.delete_dir(loc.path)
    elif kind == pafs.FileType.File:
        loc.fs.delete_file(loc.path)


def read_parquet_schema(target) -> pa.Schema:
    loc = resolve(target)
    return pq.read_schema(loc.path, filesystem=loc.fs)


def read_parquet(target, columns=None) -> pa.Table:
    loc = resolve(target)
    return pq.read_table(loc.path, columns=columns, filesystem=loc.fs)


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


def probe(target: str | Path, flag: str, *, write: bool = True) -> Location:
    """Check, before any work starts, that `target` can be written, listed and deleted (in seconds); with
    `write=False` (a reader: summary, dashboard) only that it can be listed.

    Every failure is one `StorageError` line naming `flag` and the URI: an unknown scheme, refused or
    missing credentials, an unreachable endpoint, a missing bucket, a read-only prefix. Nothing is left
    behind. Returns the location (with the normal, longer timeouts) for the real work.
    """
    loc = resolve(target, flag=flag)
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
        if _info(quick).type == pafs.FileType.File:
            raise StorageError(f"{flag}: {loc.uri}: is a file, not a prefix")
        listdir(quick)  # reading works: a refused write below means a read-only prefix
        if not write:
            return loc
        marker = quick.join(f".abacus-ray-probe-{uuid.uuid4().hex[:12]}")
        try:
            write_bytes(marker, b"probe")
        except (pa.ArrowException, OSError) as e:
            if _explain(e).startswith("access denied"):
                raise StorageError(f"{flag}: {loc.uri}: read-only: these credentials may list and read here but "
                                   "not write (use a prefix they may write, or other credentials)") from None
            raise
        try:
            if marker.name not in {c.name for c in listdir(quick)}:
                raise StorageError(f"{flag}: {loc.uri}: a written object does not show in the listing")
        finally:
            quick.fs.delete_file(marker.path)
    except StorageError:
        raise
    except (pa.ArrowException, OSError) as e:
        raise StorageError(f"{flag}: {loc.uri}: {_explain(e)}") from None
    return loc


def check_local_dir(path: Path, flag: str) -> Path:
    """Refuse a local directory that cannot be created or written to; nothing is left behind (the test is
    a temporary directory made and removed in the nearest existing ancestor: it holds for root, read-only
    mounts and quotas alike)."""
    if path.exists() and not path.is_dir():
        raise StorageError(f"{flag}: {path} exists and is not a directory")
    parent = path
    while not parent.exists() and parent.parent != parent:
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
    text = _first_line(e)
    if "NETWORK_CONNECTION" in text or "Could not connect" in text or "Could not resolve" in text:
        return f"cannot reach the endpoint ({text[text.find('AWS Error'):][:160] if 'AWS Error' in text else text[:160]})"
    if "OAuth2 access token" in text:  # Google's client found no credentials it could use
        return ("no usable Google credentials (GOOGLE_APPLICATION_CREDENTIALS, `gcloud auth application-default "
                "login` or an instance's service account)")
    if "ACCESS_DENIED" in text or "AccessDenied" in text or "SIGNATURE" in text or "InvalidAccessKeyId" in text:
        return ("access denied: the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, ~/.aws or the role) are "
                "missing, wrong, or may not write here")
    return f"not usable ({text})"
