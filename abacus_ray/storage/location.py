"""Where a run's data lives: a local path or an object-store URI parsed once into a `Location`.

`resolve` is the one parser of `--storage`, `--out`, RESULTS and checkpoint arguments (the forms it
accepts: the package docstring). A `Location` holds the `pyarrow.fs.FileSystem`, the path inside it
and the URI it came from (for messages, never with credentials).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from abacus_ray.text import reason

SCHEMES = ("file", "s3", "gs")
# what an s3:// URI may carry; never credentials
S3_QUERY = ("endpoint_override", "scheme", "region")
GCS_QUERY = ("endpoint_override", "scheme", "default_bucket_location")
# echoed in messages; every other query value is masked
SAFE_QUERY = frozenset(S3_QUERY + GCS_QUERY)
REQUEST_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 3.0
RETRIES = 3  # attempts per request; the probe makes one


class StorageError(ValueError):
    """Storage that cannot be used, in one line naming its URI (never a credential)."""


@dataclass(frozen=True)
class Location:
    """A place in some file system: `fs` and the `path` inside it; `uri` is
    what a user would type."""

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
        """`(storage_path, storage_filesystem)` for Ray Tune / Train's `RunConfig` (a
        local path needs no fs)."""
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
        """A local location is path-like (`open`, `Path`, `pq.read_table` take
        it); a remote one is not."""
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
    """`AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` (the AWS CLI's and SDKs' variables)
    as (host:port, scheme)."""
    url = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if not url:
        return None, None
    parts = urlsplit(url if "://" in url else f"https://{url}")
    return parts.netloc, parts.scheme


def _s3(
    uri: str, bucket_path: str, query: dict[str, str], timeout: float, retries: int
) -> pafs.FileSystem:
    bad = sorted(set(query) - set(S3_QUERY))
    if bad:
        what = (
            "credentials belong in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or "
            "~/.aws, not in the URI"
            if any(k in ("access_key", "secret_key", "session_token") for k in bad)
            else f"an s3:// URI takes only {', '.join(S3_QUERY)}"
        )
        raise StorageError(f"{safe_uri(uri)}: unknown query parameter "
                           f"{_param(uri, bad[0])} ({what})")
    endpoint, scheme = _endpoint_from_env()
    kwargs: dict = {"endpoint_override": query.get("endpoint_override", endpoint),
                    "scheme": query.get("scheme", scheme or "https")}
    region = (
        query.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    )
    if region:
        kwargs["region"] = region
    elif kwargs["endpoint_override"]:
        # an S3-compatible server ignores it; no region lookup over the network
        kwargs["region"] = "us-east-1"
    return pafs.S3FileSystem(
        **{k: v for k, v in kwargs.items() if v is not None},
        connect_timeout=min(timeout, 10),
        request_timeout=timeout,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=retries),
    )


def _gcs(uri: str, query: dict[str, str], timeout: float) -> pafs.FileSystem:
    """pyarrow's GCS file system (Google's default credentials), its
    retries bounded by `timeout`."""
    bad = sorted(set(query) - set(GCS_QUERY))
    if bad:
        raise StorageError(f"{safe_uri(uri)}: unknown query parameter {_param(uri, bad[0])} (a "
                           f"gs:// URI takes only {', '.join(GCS_QUERY)})")
    return pafs.GcsFileSystem(retry_time_limit=datetime.timedelta(seconds=timeout), **query)


def safe_uri(uri: str) -> str:
    """The URI for messages: no user:password part, and the value of every query parameter other
    than the known harmless ones (`S3_QUERY`, `GCS_QUERY`) masked, as is any fragment
    (`?secret_key=...`, `?token=...`, a signed URL's signature)."""
    base, _, fragment = uri.partition("#")
    base, sep, query = base.partition("?")
    scheme, slashes, rest = base.partition("://")
    if slashes:
        netloc, slash, path = rest.partition("/")
        base = f"{scheme}://{netloc.rsplit('@', 1)[-1]}{slash}{path}"
    if sep:
        pairs = [pair.partition("=") for pair in query.replace(";", "&").split("&")]
        query = "&".join(f"{k}={v}" if k in SAFE_QUERY else f"{k}=***" if eq else "***" if k else ""
                         for k, eq, v in pairs)
    return base + sep + query + ("#***" if fragment else "")


def _param(uri: str, key: str) -> str:
    """A refused query parameter named for a message: its name, or (a bare `?VALUE`, perhaps a
    token) not even that."""
    query = uri.partition("#")[0].partition("?")[2]
    named = any(
        p.partition("=")[1]
        for p in query.replace(";", "&").split("&")
        if p.partition("=")[0] == key
    )
    return repr(key) if named else "without a name (a bare value, not echoed)"


def resolve(given: str | Path, *, flag: str = "", timeout: float = REQUEST_TIMEOUT_S,
            retries: int = RETRIES) -> Location:
    """Parse a path or URI as a user gave it into a `Location` (no network access yet); `flag`
    prefixes error messages. Done once, where the argument enters: a `Location` is refused."""
    if isinstance(given, Location):
        raise TypeError(f"{given.uri}: already a Location; pass it on instead of resolving again")
    text = str(given)
    pre = f"{flag}: " if flag else ""
    if not is_uri(text):
        path = os.path.abspath(os.path.expanduser(text)) if text else ""
        if not path:
            raise StorageError(f"{pre}empty path")
        return Location(pafs.LocalFileSystem(), path, path)
    try:
        parts = urlsplit(text)
    except ValueError as e:  # e.g. an unclosed '[' in the host
        raise StorageError(f"{pre}{safe_uri(text)}: not a URI ({first_line(e)})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise StorageError(f"{pre}{safe_uri(text)}: unknown storage scheme "
                           f"{scheme + '://'!r}; use a local path, file://, s3:// (AWS or an "
                           "S3-compatible server) or gs://")
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or parts.query:
            raise StorageError(f"{pre}{safe_uri(text)}: a file:// URI is file:///absolute/path")
        return Location(pafs.LocalFileSystem(), parts.path or "/", parts.path or "/")
    if "@" in parts.netloc:
        raise StorageError(f"{pre}{safe_uri(text)}: credentials in the URI are refused; set "
                           "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or ~/.aws, an instance "
                           "role) on every node instead")
    if not parts.netloc:
        raise StorageError(f"{pre}{safe_uri(text)}: no bucket; write {scheme}://BUCKET/PREFIX")
    bucket_path = (parts.netloc + parts.path).rstrip("/")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    uri = f"{scheme}://{bucket_path}" + (f"?{parts.query}" if parts.query else "")
    try:
        fs = (
            _s3(uri, bucket_path, query, timeout, retries)
            if scheme == "s3"
            else _gcs(uri, query, timeout)
        )
    except StorageError as e:
        raise StorageError(pre + str(e)) from None
    except (pa.ArrowException, OSError, ValueError) as e:
        raise StorageError(f"{pre}{safe_uri(uri)}: {first_line(e)}") from None
    return Location(fs, bucket_path, uri)


def on_disk(path: Path) -> Location:
    """A path on this machine's disk (made absolute) as a `Location`, for code that holds a `Path`
    (a temporary directory, a file it wrote) and calls a function taking a `Location`. A URI is
    refused: it is parsed once, by `resolve`, where it enters."""
    if is_uri(path):
        raise TypeError(f"{safe_uri(str(path))}: a URI, not a path on this disk; resolve it once")
    path = os.path.abspath(path)
    return Location(pafs.LocalFileSystem(), path, path)


def located(fs: pafs.FileSystem, path: str) -> Location:
    """A path in a file system another library handed over (Ray's `Result.filesystem` and `.path`)
    as a `Location`; its URI, for messages, is the path under the file
    system's scheme (no endpoint)."""
    path = path.rstrip("/")
    if isinstance(fs, pafs.LocalFileSystem):
        return Location(fs, path, path)
    scheme = {"s3": "s3", "gcs": "gs"}.get(fs.type_name, fs.type_name)
    return Location(fs, path, f"{scheme}://{path}")


def first_line(e: BaseException) -> str:
    return reason(e, 240)


def driver_dir(loc: Location, name: str) -> Path:
    """A directory on this machine for what one run keeps beside `loc` but cannot put there
    (MLflow's SQLite store, the dashboard site): `loc/name` itself on a local disk, else
    `$ABACUS_RAY_HOME` (default `~/.abacus-ray`) `/<bucket-prefix>-<hash of the URI>/<name>`."""
    if loc.local:
        return Path(loc.path) / name
    home = Path(os.environ.get("ABACUS_RAY_HOME") or Path.home() / ".abacus-ray").expanduser()
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in loc.path)[:80]
    digest = hashlib.sha256(loc.uri.encode()).hexdigest()[:8]
    return home / f"{loc.uri.split('://', 1)[0]}-{slug}-{digest}" / name


def local_path(given: str | Path, flag: str, what: str) -> Path:
    """`given` (a path or a file:// URI) as a local path, for an input read on this machine only (a
    sweep file, a problem file, an official checkpoint); any other URI is refused in one line
    naming `flag`."""
    if not is_uri(given):
        return Path(given)
    loc = resolve(given, flag=flag)
    if not loc.local:
        raise StorageError(f"{flag}: {safe_uri(str(given))}: {what} is read from this machine's "
                           "disk; copy it here first (aws s3 cp, gcloud storage cp)")
    return Path(loc.path)
