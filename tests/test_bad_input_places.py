"""Bad input is refused (6/6): hostile places. Files that are not regular files or are far larger
than what they name (a FIFO, a link to /dev/zero, a sparse multi-GB file named like a Parquet
part, a config.json or a meta.json), a full disk, a busy port, a cluster address without its
token and two imports racing for one run directory. Each case: exit 2, one stderr line naming the
flag or the file, in seconds (a FIFO is never opened: a command that opened one would wait for a writer
forever), nothing half-written, no secret echoed.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from pace import deadline
from refusal import SMALL_MODEL, assert_refused, run, snapshot
from test_bad_input_commands import offline, places  # noqa: F401 (fixtures)

SPARSE_BYTES = 6 << 30  # a sparse file this large costs no disk and no time to make


def plant(path: Path, kind: str) -> Path:
    """Put a FIFO, a link to /dev/zero or a sparse 6 GB file where a data file goes."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        with open(path, "wb") as fh:
            fh.truncate(SPARSE_BYTES)
    return path


# (argv with {target}, the file planted relative to {target}, the culprit the refusal starts with)
EVAL = ["eval", "{target}", "--out", "{fresh}/o", "--cells", "1x1", "--quiet"]
IMPORT = ["import-official", "{target}", "--out", "{fresh}/o"]
SPECIAL = {
    "config.json eval": (EVAL, "ckpt", "config.json", "{target}"),
    "meta.json eval": (EVAL, "ckpt", "meta.json", "{target}"),
    "model.pt eval": (EVAL, "ckpt", "model.pt", "{target}/model.pt"),
    "config.json describe": (["describe", "{target}"], "ckpt", "config.json", "{target}"),
    "part summary": (["summary", "{target}"], "results", "{part}", "{target}/{part}"),
    "part dashboard": (["dashboard", "{target}", "--out", "{fresh}/site"], "results", "{part}",
                       "{target}/{part}"),
    "problem file": (["eval", "{ckpt}", "--out", "{fresh}/o", "--problems", "{target}/p.txt"],
                     "dir", "p.txt", "{target}/p.txt"),
    "sweep file": (["sweep", "{target}/s.py", "--dry-run"], "dir", "s.py", "{target}/s.py"),
    "official config": (IMPORT, "official", "model_config.json", "{target}/model_config.json"),
    "official weights": (IMPORT, "official", "model.safetensors", "{target}/model.safetensors"),
}


@pytest.mark.timeout(120)  # a FIFO that is opened waits for a writer forever: a hang fails here
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse"])
@pytest.mark.parametrize("case", sorted(SPECIAL))
def test_only_regular_files_of_a_bounded_size_are_read(case, kind, places, offline,  # noqa: F811
                                                       work, no_ray):
    argv, source, name, culprit = SPECIAL[case]
    fresh = offline.parent / "fresh"
    fresh.mkdir()
    target = fresh / "here"
    if source == "dir":
        target.mkdir()
    else:
        shutil.copytree(places[source], target)
    part = next(p.name for p in target.glob("part-*.parquet")) if source == "results" else ""
    plant(target / name.format(part=part), kind)
    fill = {"target": target, "fresh": fresh, "part": part, "ckpt": places["ckpt"]}
    started = time.monotonic()
    if source == "results" and kind == "sparse":
        # a regular file without Parquet's magic number is a broken part, as a truncated one is
        # (test_storage.py: skipped beside parts that read); here it is the only part, so the
        # directory is refused, naming it and its size, unread
        message = assert_refused([a.format(**fill) for a in argv], str(target),
                                 f"hostile places: {kind} as a data file", roots=[work, offline])
        assert f"{part} is not a readable Parquet file" in message and "bytes" in message
        assert time.monotonic() - started < deadline(60), message
        return
    message = assert_refused([a.format(**fill) for a in argv], culprit.format(**fill),
                             f"hostile places: {kind} as a data file", roots=[work, offline])
    assert time.monotonic() - started < deadline(60), message
    assert ("bytes" if kind == "sparse" else "only regular files are read") in message, message
    assert not (fresh / "o").exists() and not (fresh / "site").exists()


# --- a busy port ----------------------------------------------------------------------------------

def test_a_busy_port_is_refused_before_building(places, offline, work, no_ray):  # noqa: F811
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        site = offline.parent / "site"
        argv = ["dashboard", str(places["results"]), "--out", str(site), "--serve", "--port",
                str(port)]
        message = assert_refused(argv, "--port", "hostile places: a busy port",
                                 roots=[work, offline])
    assert str(port) in message and not site.exists()


def test_weights_beyond_free_memory_are_refused_before_they_are_read(places, offline,  # noqa: F811
                                                                    work, no_ray):
    """import-official checks a weights file against the memory it would take (read, then copied
    into the model) before opening it: a sparse file of that size stands in for a real one. The
    room is set, not found: an address-space limit (`ulimit -v`, as a batch scheduler sets) of 1 GiB
    above what this process holds, so the suite's other workers coming and going cannot move it."""
    import psutil

    size = 1 << 30  # twice that (read, then the model) is more than the limit leaves
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = psutil.Process().memory_info().vms + size
    if hard != resource.RLIM_INFINITY and cap > hard:
        pytest.skip(f"the hard address-space limit ({hard:,} bytes) leaves no room for the test")
    target = shutil.copytree(places["official"], offline.parent / "official")
    with open(target / "model.safetensors", "r+b") as fh:
        fh.truncate(size)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        message = assert_refused(["import-official", str(target), "--out", str(offline.parent / "o")],
                                 str(target / "model.safetensors"),
                                 "hostile places: weights beyond memory", roots=[work, offline])
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert "memory" in message and not (offline.parent / "o").exists()


# --- a full disk ----------------------------------------------------------------------------------

@pytest.fixture
def full_disk(tmp_path):
    """A real file system to fill up: a 32 MiB tmpfs (root may mount one; skipped where not)."""
    yield from _tmpfs(tmp_path / "disk", "32m")


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs: room to start writing a checkpoint, not to finish it."""
    yield from _tmpfs(tmp_path / "small", "1m")


def _tmpfs(mount: Path, size: str):
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                           str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_up(mount: Path) -> None:
    """Write a filler file until the file system says no space is left."""
    with open(mount / ".filler", "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * (1 << 16))
                fh.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


def test_a_full_disk_is_named_and_leaves_nothing_half_written(places, full_disk,  # noqa: F811
                                                               work, no_ray):
    fill_up(full_disk)
    disk = str(full_disk)
    cases = [([*EVAL[:1], str(places["ckpt"]), "--out", f"{disk}/results", *EVAL[4:]],
              f"{disk}/results/"),
             (["import-official", str(places["official"]), "--out", f"{disk}/imported"],
              f"{disk}/imported"),
             (["dashboard", str(places["results"]), "--out", f"{disk}/site"], f"{disk}/site")]
    for argv, culprit in cases:
        message = assert_refused(argv, culprit, "hostile places: a full disk",
                                 roots=[work, full_disk])
        assert "No space left on device" in message, message
    assert sorted(p.name for p in full_disk.iterdir()) == [".filler"]


def test_training_onto_a_full_disk_names_the_checkpoint_and_leaves_no_run(full_disk, work, no_ray):
    fill_up(full_disk)
    code, out, err = run(["train", "--out", f"{full_disk}/run", "--device", "cpu",
                          "--set", "train.max_steps=2", *(f"--set={s}" for s in SMALL_MODEL)])
    last = err.splitlines()[-1]
    assert code == 2 and "Traceback" not in err, err
    # the run's lease is its first write: the full disk is met there, before any training
    assert last.startswith(f"abacus-ray train: error: {full_disk}/run/.lease"), last
    assert "No space left" in last, last
    assert sorted(p.name for p in full_disk.iterdir()) == [".filler"]


@pytest.mark.parametrize("command", ["train", "import-official"])
def test_a_disk_that_fills_inside_torch_save_is_one_line(command, places, small_disk, work,  # noqa: F811
                                                         no_ray):
    """torch's zip writer reported the failed write as "RuntimeError: ... unexpected pos", a 45-line
    traceback, exit 1; now the OSError it was, naming the checkpoint."""
    out = small_disk / "run"
    argv = (["train", "--out", str(out), "--device", "cpu", "--set", "train.max_steps=1"]
            if command == "train" else ["import-official", str(places["official"]), "--out",
                                         str(out)])
    with open(small_disk / ".filler", "wb") as fh:  # 16 KiB left: less than any model.pt
        fh.write(b"\0" * (shutil.disk_usage(small_disk).free - (16 << 10)))
    code, _, err = run(argv)
    last = err.splitlines()[-1]
    assert code == 2 and "Traceback" not in err and "unexpected pos" not in err, err
    assert last.startswith(f"abacus-ray {command}: error: {out}") and "No space left" in last, last
    assert [p.name for p in small_disk.iterdir()] == [".filler"]


def test_a_dashboard_rebuilt_onto_a_full_disk_keeps_the_old_site(places, full_disk, work, no_ray):  # noqa: F811
    site = full_disk / "site"
    assert run(["dashboard", str(places["results"]), "--out", str(site)])[0] == 0
    fill_up(full_disk)
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    message = assert_refused(["dashboard", str(places["results"]), "--out", str(site)], str(site),
                             "hostile places: a full disk", roots=[work])
    assert "No space left on device" in message
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in full_disk.iterdir()) == [".filler", "site"]


# --- two imports racing for one run directory -----------------------------------------------------

def test_a_run_directory_written_meanwhile_is_refused(places, offline, work, no_ray):  # noqa: F811
    """The run directory appears by one rename: the import that loses (here: another import fills
    --out while this one writes its checkpoint) fails naming --out and leaves nothing of its own."""
    from abacus_ray import storage

    out = offline.parent / "run"

    def fill(tmp: Path) -> None:
        (tmp / "step-000000000").mkdir()
        assert run(["import-official", str(places["official"]), "--out", str(out)])[0] == 0
        before.update(snapshot(out))

    before: set = set()
    with pytest.raises(FileExistsError, match=f"^--out: {out} exists and is not empty"):
        storage.create_dir(storage.on_disk(out), fill, "--out")
    assert snapshot(out) == before and [p.name for p in out.iterdir()] == ["step-000000000"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["cwd", "run"]  # no temporary one left
    message = assert_refused(["import-official", str(places["official"]), "--out", str(out)],
                             "--out", "hostile places: two imports into one --out",
                             roots=[work, offline.parent])
    assert "not empty" in message


# --- a cluster address without its token -----------------------------------------------------------

@pytest.mark.parametrize("token", [None, "not-a-secret-token"])
def test_a_cluster_that_cannot_be_joined_is_refused_first(token, offline, work,  # noqa: F811
                                                         monkeypatch, no_ray):
    """No token: refused naming --address and the ways to give one; a token but no head on the port:
    refused naming --address (in seconds, no Ray started); the token is never echoed."""
    monkeypatch.setenv("HOME", str(offline.parent))  # no ~/.ray/auth_token
    for key in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS", "RAY_AUTH_MODE"):
        monkeypatch.delenv(key, raising=False)
    if token is not None:
        monkeypatch.setenv("RAY_AUTH_TOKEN", token)
    storage_dir = offline.parent / "sweeps"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    message = assert_refused(["sweep", "fig10_k", "--address", f"127.0.0.1:{closed}", "--storage",
                              str(storage_dir), "--set", "train.max_steps=1"], "--address",
                             "hostile places: a cluster without its token",
                             roots=[work, offline.parent])
    assert ("RAY_AUTH_TOKEN" in message) == (token is None), message
    assert "not-a-secret-token" not in message and not storage_dir.exists()
    # eval-all joins a cluster too: refused the same way, before any checkpoint is read (it used to
    # hang for minutes, or end in Ray's authentication traceback)
    results = offline.parent / "missing-results"
    message = assert_refused(["eval-all", str(results), "--address", f"127.0.0.1:{closed}"],
                             "--address", "hostile places: a cluster without its token",
                             roots=[work, offline.parent])
    assert ("RAY_AUTH_TOKEN" in message) == (token is None), message


# --- surroundings: a working directory that was deleted ---------------------------------------------

@pytest.mark.parametrize("argv", [["-m", "abacus_ray.cli", "train", "--preset", "tiny"],
                                  ["sweeps/fig10_k.py", "--dry-run"]])
def test_a_deleted_working_directory_is_one_line_before_torch_loads(argv, tmp_path):
    """torch's oneMKL loader dies with a fatal error there; every entry point checks first."""
    gone = tmp_path / "gone"
    gone.mkdir()
    repo = Path(__file__).resolve().parents[1]
    script = argv if argv[0] == "-m" else [str(repo / argv[0]), *argv[1:]]
    code = (f"import os, subprocess, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); "
            f"sys.exit(subprocess.run([sys.executable, *{script!r}]).returncode)")
    done = subprocess.run([os.sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(repo)})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == ("abacus-ray: error: the working directory no longer exists "
                                   "(deleted while this shell stood in it); cd to a directory "
                                   "that does")


def test_a_resume_that_changes_the_model_is_refused_before_its_first_line(tmp_path):
    """`train --resume --set model.layers=3` used to print "resuming ..." and then fail inside the
    loop."""
    run_dir = tmp_path / "run"
    sets = [a for item in SMALL_MODEL for a in ("--set", item)]
    trained = run(["train", "--preset", "tiny", *sets, "--set", "train.max_steps=1",
                   "--out", str(run_dir)])
    assert trained[0] == 0, trained
    message = assert_refused(["train", "--resume", "--out", str(run_dir), "--set",
                              "model.layers=3"], "--resume", "a resume that changes the model",
                             roots=[tmp_path])
    assert "was trained with a different model.layers" in message


@pytest.mark.parametrize("flag_argv", [
    ("--out", ["train", "--preset", "tiny", "--set", "train.max_steps=1", "--out", "{out}"]),
    ("--out", ["dashboard", "{results}", "--out", "{out}"]),
    ("--storage", ["sweep", "fig10_k", "--preset", "tiny", "--dry-run", "--storage", "{out}"]),
])
def test_an_output_behind_a_symlink_loop_is_refused_before_any_work(flag_argv, tmp_path, no_ray):
    """It used to be found when the first checkpoint was written, after the training."""
    flag, argv = flag_argv
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    results = tmp_path / "results"
    if "{results}" in argv:
        from dashboards.sample import synthetic_results
        synthetic_results(results, [("x/y", [])], [(1, 1)], per_cell=2)
    argv = [a.format(out=tmp_path / "a" / "run", results=results) for a in argv]
    message = assert_refused(argv, flag, "hostile places: a symlink loop", roots=[tmp_path])
    assert f"{tmp_path / 'a'} is a symbolic link that leads nowhere" in message


def test_a_sweep_onto_a_disk_too_small_for_it_is_refused_before_ray(full_disk, work, no_ray):
    """What `plan` says the sweep writes (two tiny trials: about 90 MB) against the 32 MiB disk."""
    message = assert_refused(["sweep", "fig10_k", "--preset", "tiny", "--storage",
                              str(full_disk / "st")], "--storage", "hostile places: a full disk",
                             roots=[full_disk])
    assert "MB free, but this sweep will write about" in message
    assert list(full_disk.iterdir()) == []


@pytest.mark.parametrize("argv, place", [
    (["sweep", "fig10_k", "--preset", "tiny", "--storage", "{root}"], "{root}/fig10_k"),
    (["train", "--preset", "tiny", "--set", "train.max_steps=1", "--out", "{root}/run"],
     "{root}/run"),
])
def test_a_second_run_into_a_leased_place_is_refused_before_any_work(argv, place, tmp_path, no_ray):
    """Two sweeps into one --storage trained into the same trial directories; two trains into one
    --out each printed the same checkpoint path. The first holds the lease (here: this test
    process, alive); the second is refused before Ray or a model."""
    import json

    import psutil

    me = psutil.Process()
    held = Path(place.format(root=tmp_path))
    held.mkdir(parents=True)
    (held / ".lease").write_text(json.dumps({"host": socket.gethostname(), "pid": me.pid,
                                             "started": me.create_time(), "since": "now",
                                             "token": "first"}))
    flag = "--storage" if argv[0] == "sweep" else "--out"
    message = assert_refused([a.format(root=tmp_path) for a in argv], flag,
                             "hostile places: a place another run holds", roots=[tmp_path])
    assert f"{held} is in use by another run (pid {me.pid} on " in message
