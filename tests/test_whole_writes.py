"""The file system Ray Tune writes its state through on a local path: a file appears whole or not
at all, so a driver killed mid-copy cannot leave a truncated experiment state for `Tuner.restore`."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow.fs as pafs
import pytest

from abacus_ray import storage
from abacus_ray.storage import on_disk
from abacus_ray.storage.whole_writes import TMP_PREFIX, whole_writes_fs


def test_a_write_replaces_its_target_only_when_closed(tmp_path):
    fs, target = whole_writes_fs(), tmp_path / "experiment_state-1.json"
    storage.write_text(on_disk(target), '{"old": true}')
    out = fs.open_output_stream(str(target))
    out.write(b'{"new": ')
    assert target.read_text() == '{"old": true}'  # half written: readers still see the old file
    out.write(b"true}")
    out.close()
    assert target.read_text() == '{"new": true}'
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TMP_PREFIX)]


@pytest.mark.slow  # a process of its own: out of the fast tier
def test_a_writer_killed_mid_copy_leaves_the_old_file_and_a_hidden_temporary(tmp_path):
    """Tune's upload is `pyarrow.fs.copy_files` into this file system; SIGKILL it mid-write."""
    storage.write_text(on_disk(tmp_path / "state.json"), "whole")
    script = ("import os, sys\n"
              "from abacus_ray.storage.whole_writes import whole_writes_fs\n"
              "out = whole_writes_fs().open_output_stream(sys.argv[1])\n"
              "out.write(b'half'); out.flush(); os.kill(os.getpid(), 9)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "state.json")],
                          env={**os.environ, "PYTHONPATH": os.getcwd()}, timeout=120)
    assert done.returncode == -9
    assert (tmp_path / "state.json").read_text() == "whole"
    (left,) = [p for p in tmp_path.iterdir() if p.name != "state.json"]
    assert left.name.startswith(TMP_PREFIX) and b"half".startswith(left.read_bytes())  # whatever reached the disk


def test_copy_files_and_listing_work_as_on_the_local_file_system(tmp_path):
    src = tmp_path / "staging"
    storage.write_text(on_disk(src / "a.json"), "a")
    storage.write_bytes(on_disk(src / "sub" / "b.pkl"), b"b")  # makes sub/
    fs = whole_writes_fs()
    pafs.copy_files(str(src), str(tmp_path / "exp"), destination_filesystem=fs)
    got = fs.get_file_info(pafs.FileSelector(str(tmp_path / "exp"), recursive=True))
    assert sorted(os.path.relpath(i.path, tmp_path / "exp") for i in got) == ["a.json", "sub", "sub/b.pkl"]
    assert (tmp_path / "exp" / "sub" / "b.pkl").read_bytes() == b"b"
    assert fs == whole_writes_fs()
