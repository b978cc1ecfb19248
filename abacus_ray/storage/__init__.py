"""Where everything a run keeps lives: a local path or an object-store URI, through `pyarrow.fs`.

One owner of storage for the whole package: every file of run data is read and written here
(docs/guide.md, "Cluster without a shared file system"). A `--storage`, `--out`, RESULTS or
checkpoint argument is parsed once into a `Location`: a `pyarrow.fs.FileSystem`, the path inside it
and the URI it came from (for messages). Accepted forms:

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

A path or URI is resolved once, where it enters (the command line); everything below takes the
`Location` (or a `Path` where only this machine's disk is meant):

    loc = resolve("s3://bkt/runs?endpoint_override=127.0.0.1:8333&scheme=http")
    located(fs, path) -> Location           # a file system + path another library (Ray) handed over
    on_disk(path) -> Location               # a Path this process holds (a temporary directory)
    probe(uri, "--storage") -> Location     # resolve + check_location: one-line StorageError
    check_location(loc, "--out")            # small write/list/delete of a resolved location
    local_path(uri, "--problems", "a problem file") -> Path  # this machine's files only
    not_a_file(path, "missing", "a problem file")  # the error for a missing file (or a directory)
    loc / "fig10_k" / "sweep.json"          # join (also loc.join(*parts)); str(loc) is the URI
    exists, is_file, is_dir, listdir, glob(loc, "part-*.parquet"), find(loc, "meta.json")
    read_bytes, read_text, read_json, write_bytes, write_text, write_csv, copy_file (atomic), delete
    check_regular_file(loc, limit)          # a regular file of at most limit bytes, before a read
    memory_limit()                          # the most bytes one whole-file read may take now
    create_dir(loc, fill)                   # a new directory, whole; refused if another wrote first
    read_parquet, read_parquet_schema, open_parquet, write_parquet (atomic)
    write_files(loc, {name: data})          # several files of a directory, each whole (site pages)
    write_dir(loc, {name: data}, fill=...)  # a whole directory (a checkpoint), never half done:
                                            # `fill` streams big files in with write_stream;
                                            # renamed into place on a disk, published by its
                                            # manifest on an object store (`dirs` says what holds
                                            # on each)
    upload(local_dir, loc), download(loc, local_dir)  # whole directories to and from this machine
    with lease(loc, "--out"): ...           # one owner per output directory (`lease`)

`StorageError` is a `ValueError`: the command line prints it as one line and exits 2. The modules:
`location` (parsing into a `Location`), `files` (files and Parquet, atomic writes), `dirs` (whole
directories), `probe` (checks before work), `whole_writes` (the local file system Ray Tune writes
its experiment state through, `tune_storage(loc)`: each file whole).
"""

from abacus_ray.storage.dirs import (
    build_aside,
    create_dir,
    delete,
    download,
    upload,
    write_dir,
    write_files,
)
from abacus_ray.storage.files import (
    MAX_TEXT_BYTES,
    NotParquetError,
    check_parquet_file,
    check_regular_file,
    copy_file,
    cpu_quota,
    disk_full,
    exists,
    file_info,
    find,
    free_bytes,
    glob,
    is_dir,
    is_file,
    listdir,
    memory_limit,
    naming_full_disk,
    not_a_file,
    open_parquet,
    read_bytes,
    read_json,
    read_parquet,
    read_parquet_schema,
    read_text,
    tree_bytes,
    write_bytes,
    write_csv,
    write_parquet,
    write_stream,
    write_text,
)
from abacus_ray.storage.lease import LEASE_FILE, lease
from abacus_ray.storage.location import (
    Location,
    StorageError,
    driver_dir,
    is_uri,
    local_path,
    located,
    on_disk,
    resolve,
    safe_uri,
)
from abacus_ray.storage.probe import check_local_dir, check_location, probe
from abacus_ray.storage.whole_writes import tune_storage

__all__ = [
    "LEASE_FILE",
    "MAX_TEXT_BYTES",
    "Location",
    "NotParquetError",
    "StorageError",
    "build_aside",
    "check_local_dir",
    "check_location",
    "check_parquet_file",
    "check_regular_file",
    "memory_limit",
    "cpu_quota",
    "disk_full",
    "naming_full_disk",
    "copy_file",
    "create_dir",
    "delete",
    "download",
    "driver_dir",
    "exists",
    "file_info",
    "find",
    "free_bytes",
    "glob",
    "is_dir",
    "is_file",
    "is_uri",
    "lease",
    "listdir",
    "local_path",
    "located",
    "not_a_file",
    "on_disk",
    "open_parquet",
    "probe",
    "read_bytes",
    "read_parquet",
    "read_json",
    "read_parquet_schema",
    "read_text",
    "resolve",
    "safe_uri",
    "tree_bytes",
    "tune_storage",
    "upload",
    "write_bytes",
    "write_stream",
    "write_dir",
    "write_files",
    "write_parquet",
    "write_csv",
    "write_text",
]
