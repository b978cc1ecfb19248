"""abacus_ray.storage on a local disk and on a real S3 server (SeaweedFS on loopback), the startup probe's
one-line refusals of bad storage, and the results dataset's two-writer and corrupt-part behaviour."""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from refusal import assert_refused, run
from s3server import s3_env_fixture, s3_fixture  # noqa: F401

from abacus_ray import storage
from abacus_ray.evaluation.results import KEY, part_files, read_cells
from abacus_ray.storage import StorageError, on_disk

pytestmark = pytest.mark.cost(40)  # seconds in `make test`: its place in the order (conftest)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.slow)])  # S3: not test-fast
def root(request, tmp_path):
    """A fresh storage root: a local directory, or a prefix of the S3 server's bucket."""
    if request.param == "local":
        return str(tmp_path / "store")
    s3 = request.getfixturevalue("s3_env")
    return s3.uri(f"t-{request.node.name[-12:].strip('[]')}-{os.getpid()}")


def test_files_directories_and_parquet(root, tmp_path):
    loc = storage.resolve(root)
    assert str(loc / "a" / "b.txt") == f"{root}/a/b.txt" and (loc / "a").parent.uri == loc.uri
    assert not storage.exists(loc / "a") and storage.listdir(loc) == [] and storage.glob(loc, "*") == []
    storage.write_text(loc / "a" / "b.txt", "hello")
    storage.write_bytes(loc / "a" / "c" / "d.bin", b"\x00\x01")
    assert storage.read_text(loc / "a" / "b.txt") == "hello" and storage.is_dir(loc / "a")
    assert storage.is_file(loc / "a" / "c" / "d.bin") and not storage.is_file(loc / "a")
    assert [c.name for c in storage.listdir(loc / "a")] == ["b.txt", "c"]
    assert [f.name for f in storage.glob(loc / "a", "*.txt")] == ["b.txt"]
    assert [f.uri for f in storage.find(loc, "d.bin")] == [f"{root}/a/c/d.bin"]
    table = pa.table({"x": [1, 2, 3]})
    storage.write_parquet(loc / "p" / "part-1.parquet", table)
    assert storage.read_parquet(loc / "p" / "part-1.parquet").equals(table)
    assert storage.read_parquet_schema(loc / "p" / "part-1.parquet").names == ["x"]
    with pytest.raises(FileNotFoundError, match="nope"):
        storage.read_bytes(loc / "nope")
    (tmp_path / "up" / "sub").mkdir(parents=True)
    (tmp_path / "up" / "sub" / "w.bin").write_bytes(b"weights")
    storage.upload(tmp_path / "up", loc / "ckpt")
    storage.download(loc / "ckpt", tmp_path / "down")
    assert (tmp_path / "down" / "sub" / "w.bin").read_bytes() == b"weights"
    storage.delete(loc / "a")
    assert not storage.exists(loc / "a") and storage.exists(loc / "p")
    if loc.local:  # nothing but the files themselves: no temporary left over
        assert not [p for p in Path(loc.path).rglob(".tmp-*")]


def test_uri_forms_and_refused_uris(s3_env):
    s3 = s3_env
    named = storage.resolve(s3.uri("x", endpoint_in_uri=True))  # the endpoint in the URI's query
    storage.write_text(named / "q.txt", "q")
    assert storage.read_text(storage.resolve(s3.uri("x/q.txt"))) == "q"  # ... and from AWS_ENDPOINT_URL
    assert named.uri.endswith(f"?endpoint_override={s3.endpoint}&scheme=http")
    assert (named / "q.txt").uri == f"s3://{s3.bucket}/x/q.txt?endpoint_override={s3.endpoint}&scheme=http"
    assert storage.resolve("file:///tmp/abc").path == "/tmp/abc" and storage.resolve("rel").path == os.path.abspath("rel")
    blob = pickle.dumps(named.fs)  # what Ray ships to its workers: the endpoint, never the key
    assert s3.endpoint.encode() in blob and s3.secret_key.encode() not in blob and s3.access_key.encode() not in blob
    for uri, words in [("foo://x", "unknown storage scheme 'foo://'"),
                       (f"s3://AK:{s3.secret_key}@{s3.bucket}/x", "credentials in the URI are refused"),
                       (f"s3://{s3.bucket}/x?secret_key=zz", "unknown query parameter 'secret_key'"),
                       ("s3:///x", "no bucket")]:
        with pytest.raises(StorageError) as e:
            storage.resolve(uri, flag="--storage")
        assert str(e.value).startswith("--storage: ") and words in str(e.value), str(e.value)
        assert s3.secret_key not in str(e.value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_probe_refuses_bad_storage_in_one_line(s3_env, monkeypatch, unwritable):
    s3 = s3_env
    assert storage.probe(s3.uri("ok"), "--storage").uri == s3.uri("ok")
    assert storage.listdir(storage.resolve(s3.uri("ok"))) == []  # the probe's object is gone
    cases = [(s3.uri("x").replace(s3.bucket, "no-such-bucket"), {}, "no bucket named 'no-such-bucket'"),
             (s3.uri("x"), {"AWS_SECRET_ACCESS_KEY": "wrong"}, "access denied"),
             (s3.uri("x"), {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None}, "access denied"),
             (s3.uri("x"), {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{_free_port()}"}, "cannot reach the endpoint")]
    for uri, env, words in cases:
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.delenv(k) if v is None else m.setenv(k, v)
            with pytest.raises(StorageError) as e:
                storage.probe(uri, "--storage")
        message = str(e.value)
        assert message.startswith(f"--storage: {uri}: ") and words in message and "\n" not in message, message
        assert s3.secret_key not in message and s3.access_key not in message
    with monkeypatch.context() as m:  # credentials that may list and read the bucket but not write to it
        for k, v in s3.reader_env().items():
            m.setenv(k, v)
        assert storage.probe(s3.uri("x"), "--results", write=False).uri == s3.uri("x")  # a reader is fine
        with pytest.raises(StorageError) as e:
            storage.probe(s3.uri("x"), "--storage")
        assert str(e.value).startswith(f"--storage: {s3.uri('x')}: read-only: ") and "\n" not in str(e.value)
        assert s3.reader[1] not in str(e.value)
    if unwritable is not None:  # a read-only place on a local disk
        with pytest.raises(StorageError, match="is not writable|is not a directory"):
            storage.probe(unwritable / "sub", "--out")


def test_bad_storage_is_refused_before_ray_starts(s3_env, no_ray, tmp_path, monkeypatch):
    s3 = s3_env
    for uri, words in [("foo://x", "--storage: foo://x: unknown storage scheme"),
                       (s3.uri("r").replace(s3.bucket, "nobucket"), "--storage: s3://nobucket/r: no bucket")]:
        message = assert_refused(["sweep", "fig10_k", "--storage", uri, "--max-trials", "1"], words,
                                 "bad storage (before Ray)", roots=[tmp_path])
        assert s3.secret_key not in message
    with monkeypatch.context() as m:  # a prefix these credentials may read but not write
        for k, v in s3.reader_env().items():
            m.setenv(k, v)
        message = assert_refused(["sweep", "fig10_k", "--storage", s3.uri("ro"), "--max-trials", "1"],
                                 f"--storage: {s3.uri('ro')}: read-only", "bad storage (before Ray)", roots=[tmp_path])
        assert assert_refused(["sweep", "fig10_k", "--storage", s3.uri("ro"), "--dry-run"],  # a dry run probes too
                              f"--storage: {s3.uri('ro')}: read-only", "bad storage (before Ray)",
                              roots=[tmp_path]) == message
    assert s3.reader[1] not in message and s3.secret_key not in message
    assert not list(Path.cwd().glob("s3:*")) and not list(Path.cwd().glob("foo:*"))  # never a local 's3:' folder


def _eval(ckpt: Path, out: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "abacus_ray.cli", "eval", str(ckpt), "--out", out, "--cells",
                             "1-6x1-6", "--per-cell", "4", "--quiet", "--flush-every-cells", "3", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def _raw_keys(out) -> Counter:
    """Every key of every part, duplicates counted: what the storage itself holds."""
    keys: Counter = Counter()
    for f in part_files(storage.resolve(out)):
        t = pq.read_table(pa.BufferReader(storage.read_bytes(f)), columns=list(KEY))
        keys.update(zip(*(t.column(k).to_pylist() for k in KEY), strict=True))
    return keys


@pytest.mark.slow  # `abacus-ray eval` processes
@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.slow)])
def test_two_concurrent_evals_leave_each_key_once(where, ckpt, tmp_path, request):
    sweep = str(tmp_path / "sweep") if where == "local" else request.getfixturevalue("s3_env").uri(f"two-{os.getpid()}")
    out = f"{sweep}/results"
    procs = [_eval(ckpt, out), _eval(ckpt, out)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    cells = read_cells(storage.resolve(out))
    assert len(cells) == 36 and not cells.duplicated(list(KEY)).any()
    raw = _raw_keys(out)
    assert set(raw) == {tuple(r) for r in cells[list(KEY)].itertuples(index=False)}
    assert sum(raw.values()) < 2 * 36, raw  # the second writer followed the first instead of doubling it
    code, text, _ = run(["summary", out])
    assert code == 0 and " 36" in text.splitlines()[-1]
    code, text, _ = run(["summary", sweep])  # the results' sweep root (a prefix on S3): found one folder down
    assert code == 0 and " 36" in text.splitlines()[-1]


@pytest.mark.slow  # two `abacus-ray eval` processes
def test_corrupt_part_is_named_skipped_and_reevaluated(ckpt, tmp_path):
    out = tmp_path / "res"
    proc = _eval(ckpt, str(out))
    assert proc.communicate(timeout=300) and proc.returncode == 0
    parts = part_files(on_disk(out))
    assert len(parts) >= 3
    bad = parts[1]
    lost = len(pq.read_table(bad))
    Path(bad).write_bytes(Path(bad).read_bytes()[: 40])  # truncated, as a full disk or a killed copy leaves it
    code, text, err = run(["summary", str(out)])
    assert code == 0 and f"{bad.name} is not a readable Parquet file" in err and "skipped" in err
    assert f" {36 - lost}" in text.splitlines()[-1]
    proc = _eval(ckpt, str(out))
    stdout, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0 and f"evaluated {lost} cells ({36 - lost} already present)" in stdout, stdout
    assert len(read_cells(on_disk(out))) == 36


def test_gcs_uris_resolve_without_network():
    """gs:// goes to pyarrow's GCS file system (not exercised live: no GCS here); its query is checked."""
    loc = storage.resolve("gs://bkt/runs")
    assert type(loc.fs).__name__ == "GcsFileSystem" and loc.path == "bkt/runs" and str(loc / "x") == "gs://bkt/runs/x"
    with pytest.raises(StorageError, match="unknown query parameter 'token'"):
        storage.resolve("gs://bkt/runs?token=abc")


def _visible(loc) -> dict[str, bytes] | None:
    """What a reader of a checkpoint-like directory gets: None while it counts as absent (no
    meta.json, or `download` refuses it), else every file `download` copies."""
    import tempfile

    if not storage.exists(loc / "meta.json"):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            storage.download(loc, Path(tmp))
        except FileNotFoundError:
            return None
        return {p.relative_to(tmp).as_posix(): p.read_bytes()
                for p in Path(tmp).rglob("*") if p.is_file()}


def test_a_trial_killed_before_its_first_report_is_named_from_the_bucket(s3_env):
    """Tune's result of such a trial has no config: its run name comes from the params.json Tune
    wrote into the trial's directory, read through the storage owner from the file system Ray hands
    back."""
    from ray.tune import Result

    from abacus_ray.cluster.trial import run_name

    trial = storage.resolve(s3_env.uri(f"tune-{os.getpid()}")) / "trial_0"
    storage.write_text(trial / "params.json", '{"run": "fig10_k/max_k=25_seed=0"}')
    result = Result(metrics={}, checkpoint=None, error=None, path=trial.path,
                    _storage_filesystem=trial.fs)
    assert run_name(result) == "fig10_k/max_k=25_seed=0"
    gone = Result(metrics={}, checkpoint=None, error=None, path=(trial.parent / "trial_1").path,
                  _storage_filesystem=trial.fs)
    missing = f"s3://{s3_env.bucket}/tune-{os.getpid()}/trial_1/params.json"
    with pytest.raises(FileNotFoundError, match=missing):
        run_name(gone)


def test_a_hostile_manifest_reads_as_an_absent_directory(s3_env, tmp_path):
    """A manifest naming a file outside its directory, or not a manifest at all, is never followed:
    the directory counts as absent and nothing is written anywhere."""
    from abacus_ray.storage import dirs

    loc = storage.resolve(s3_env.uri(f"hostile-{os.getpid()}")) / "step-000000001"
    storage.write_dir(loc, {"meta.json": b"{}"})
    escape = {"../../escape.txt": {"size": 2, "sha256": "0" * 64}}
    for manifest in [json.dumps({"state": "complete", "files": escape}), "[[[" * 10_000,
                     json.dumps({"state": "complete", "files": {"meta.json": "no size"}})]:
        storage.write_text(loc / dirs.MANIFEST, manifest)
        with pytest.raises(FileNotFoundError, match="incomplete directory"):
            storage.download(loc, tmp_path / "copy" / "here")
        assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def _planted_lease(loc, **owner) -> None:
    import json

    storage.write_text(loc / storage.LEASE_FILE, json.dumps(
        {"host": "elsewhere", "pid": 1, "started": 0.0, "since": "then", "token": "theirs"} | owner))


def test_one_owner_per_output_place(root, capsys):
    """A second holder is refused in one line naming the first; a lease whose process is gone (this
    host, no such process) is taken over with a line; another host's only with --break-lease."""
    import psutil

    loc = storage.resolve(root) / "run"
    with storage.lease(loc, "--out"):
        with pytest.raises(StorageError, match=r"^--out: .* is in use by another run \(pid "):
            with storage.lease(loc, "--out"):
                pass
    assert not storage.exists(loc / storage.LEASE_FILE)  # given back at the end
    me = psutil.Process()
    import socket

    _planted_lease(loc, host=socket.gethostname(), pid=me.pid, started=me.create_time())
    with pytest.raises(StorageError, match="in use by another run"):  # a live process holds it
        with storage.lease(loc, "--out"):
            pass
    _planted_lease(loc, host=socket.gethostname(), pid=me.pid, started=me.create_time() - 100)
    with storage.lease(loc, "--out"):  # that pid now runs another process: the owner is gone
        pass
    assert "taken over: that process is gone" in capsys.readouterr().err
    _planted_lease(loc)  # another host's: this machine cannot tell
    with pytest.raises(StorageError, match="rerun with --break-lease"):
        with storage.lease(loc, "--out"):
            pass
    with storage.lease(loc, "--out", break_lease=True):
        pass
    assert "broken (--break-lease)" in capsys.readouterr().err
    assert not storage.exists(loc / storage.LEASE_FILE)
