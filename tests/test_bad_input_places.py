"""Bad input is refused (6/6): hostile places. Files that are not regular files or are far larger than
what they name (a FIFO, a link to /dev/zero, a sparse multi-GB file named like a Parquet part, a
config.json or a meta.json), a full disk, a busy port, a cluster address without its token and two
imports racing for one run directory. Each case: exit 2, one stderr line naming the flag or the file,
in seconds (a FIFO is never opened: a command that opened one would wait for a writer forever), nothing
half-written, no secret echoed.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import pytest
from refusal import assert_refused
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
SPECIAL = {
    "config.json eval": (["eval", "{target}", "--out", "{fresh}/o", "--cells", "1x1", "--quiet"],
                         "ckpt", "config.json", "{target}"),
    "meta.json eval": (["eval", "{target}", "--out", "{fresh}/o", "--cells", "1x1", "--quiet"],
                       "ckpt", "meta.json", "{target}"),
    "model.pt eval": (["eval", "{target}", "--out", "{fresh}/o", "--cells", "1x1", "--quiet"],
                      "ckpt", "model.pt", "{target}/model.pt"),
    "config.json describe": (["describe", "{target}"], "ckpt", "config.json", "{target}"),
    "part summary": (["summary", "{target}"], "results", "{part}", "{target}/{part}"),
    "part dashboard": (["dashboard", "{target}", "--out", "{fresh}/site"], "results", "{part}", "{target}/{part}"),
    "problem file": (["eval", "{ckpt}", "--out", "{fresh}/o", "--problems", "{target}/p.txt"], "dir", "p.txt",
                     "{target}/p.txt"),
    "sweep file": (["sweep", "{target}/s.py", "--dry-run"], "dir", "s.py", "{target}/s.py"),
    "official config": (["import-official", "{target}", "--out", "{fresh}/o"], "official", "model_config.json",
                        "{target}/model_config.json"),
    "official weights": (["import-official", "{target}", "--out", "{fresh}/o"], "official", "model.safetensors",
                         "{target}/model.safetensors"),
}


@pytest.mark.timeout(120)  # a FIFO that is opened waits for a writer forever: a hang fails here
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse"])
@pytest.mark.parametrize("case", sorted(SPECIAL))
def test_only_regular_files_of_a_bounded_size_are_read(case, kind, places, offline, work, no_ray):  # noqa: F811
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
    message = assert_refused([a.format(**fill) for a in argv], culprit.format(**fill),
                             f"hostile places: {kind} as a data file", roots=[work, offline])
    assert time.monotonic() - started < 60, message
    assert not (fresh / "o").exists() and not (fresh / "site").exists()


# --- a busy port ----------------------------------------------------------------------------------------

def test_serving_on_a_busy_port_is_refused_naming_the_port_before_the_site_is_built(places, offline,  # noqa: F811
                                                                                      work, no_ray):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        site = offline.parent / "site"
        message = assert_refused(["dashboard", str(places["results"]), "--out", str(site), "--serve",
                                  "--port", str(port)], "--port", "hostile places: a busy port",
                                 roots=[work, offline])
    assert str(port) in message and not site.exists()


def test_weights_larger_than_free_memory_are_refused_before_they_are_read(places, offline, work, no_ray):  # noqa: F811
    """import-official checks a weights file against the memory it would take (read, then copied into
    the model) before opening it: a sparse file of that size stands in for a real one."""
    from abacus_ray import storage
    from abacus_ray.model.official_files import MAX_WEIGHTS_BYTES

    size = storage.memory_limit() // 2 + (1 << 20)
    if size > MAX_WEIGHTS_BYTES:
        pytest.skip(f"this machine has the memory to import a {MAX_WEIGHTS_BYTES:,}-byte weights file")
    target = shutil.copytree(places["official"], offline.parent / "official")
    with open(target / "model.safetensors", "r+b") as fh:
        fh.truncate(size)
    message = assert_refused(["import-official", str(target), "--out", str(offline.parent / "o")],
                             str(target / "model.safetensors"), "hostile places: weights beyond memory",
                             roots=[work, offline])
    assert "memory" in message and not (offline.parent / "o").exists()
