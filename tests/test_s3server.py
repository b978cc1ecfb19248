"""The tests' S3 server (`tests/s3server.py`): a real SeaweedFS that pyarrow reads and writes Parquet on,
reachable only with its credentials, and gone without a trace when stopped."""

from __future__ import annotations

import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs
from s3server import S3Server, s3_fixture, s3_server  # noqa: F401 (the `s3` fixture)

pytestmark = pytest.mark.slow  # S3 servers (`weed` processes): `make test`, not `make test-fast`


def test_pyarrow_reads_and_writes_parquet_through_the_standard_variables(s3: S3Server, monkeypatch):
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    table = pa.table({"i": [1, 2, 3], "n_correct": [10, 9, 0]})
    s3fs, path = fs.FileSystem.from_uri(s3.uri("run/results/part-0.parquet"))  # endpoint from AWS_ENDPOINT_URL
    assert path == f"{s3.bucket}/run/results/part-0.parquet"
    pq.write_table(table, path, filesystem=s3fs)
    assert pq.read_table(f"{s3.bucket}/run/results", filesystem=s3fs).to_pandas().equals(table.to_pandas())
    listed = s3.filesystem().get_file_info(fs.FileSelector(f"{s3.bucket}/run", recursive=True))
    assert [i.path for i in listed if i.type == fs.FileType.File] == [path]


def test_the_uri_can_name_the_server_itself(s3: S3Server, monkeypatch):
    for name, value in s3.env().items():
        if name != "AWS_ENDPOINT_URL":  # the endpoint comes from the URI's query only
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    s3fs, path = fs.FileSystem.from_uri(s3.uri("q/x.parquet", endpoint_in_uri=True))
    pq.write_table(pa.Table.from_pandas(pd.DataFrame({"a": [1]})), path, filesystem=s3fs)
    assert s3.filesystem().get_file_info(path).size > 0
    assert s3.uri("q/") == f"s3://{s3.bucket}/q" and s3.uri() == f"s3://{s3.bucket}"


def test_wrong_credentials_are_refused(s3: S3Server):
    wrong = fs.S3FileSystem(endpoint_override=s3.endpoint, scheme="http", access_key=s3.access_key,
                            secret_key=s3.secret_key + "x", region="us-east-1")
    with pytest.raises(OSError):
        wrong.get_file_info(fs.FileSelector(s3.bucket))


def test_two_servers_side_by_side_and_nothing_left_after_stop():
    with s3_server() as one, s3_server() as two:
        assert one.endpoint != two.endpoint
        pids = {one.proc.pid, two.proc.pid}
        listening = {c.laddr for c in psutil.net_connections("tcp") if c.pid in pids and c.status == "LISTEN"}
        assert listening and all(addr.ip == "127.0.0.1" for addr in listening), listening
        dirs = [one.workdir, two.workdir]
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    assert not any(d.exists() for d in dirs)
