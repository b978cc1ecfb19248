"""`abacus_ray.storage` owns every read and write of run data: its whole-directory write (what a checkpoint
is written with) behaves atomically, and no other module renames, removes or writes run data itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from abacus_ray import storage

REPO = Path(__file__).resolve().parents[1]
# Calls that write, move or remove files behind the storage owner's back (module alias, function).
BYPASSES = {("os", "replace"), ("os", "rename"), ("shutil", "rmtree"), ("shutil", "move"), ("shutil", "copyfile"),
            ("pq", "write_table"), ("pq", "read_table")}
STORAGE_NAMES = ("storage", "storage_module")  # how modules import the owner


def _bypasses(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
        if (owner, node.func.attr) in BYPASSES or (
                node.func.attr in ("write_text", "write_bytes") and owner not in STORAGE_NAMES):
            lines.append(node.lineno)
    return lines


def test_only_the_storage_owner_writes_moves_or_removes_files():
    """A write elsewhere is allowed only for what is not run data, and says so on its line."""
    found = []
    for root in ("abacus_ray", "dashboards"):
        for path in sorted((REPO / root).rglob("*.py")):
            if path.is_relative_to(REPO / "abacus_ray" / "storage"):
                continue
            text = path.read_text().splitlines()
            found += [f"{path.relative_to(REPO)}:{n}" for n in _bypasses(path) if "not run data" not in text[n - 1]]
    assert found == []


def test_a_directory_write_replaces_the_old_one_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "step-000000001"
    storage.write_dir(target, {"meta.json": "{}", "a.txt": "old"})
    storage.write_dir(target, {"meta.json": '{"n": 2}'}, fill=lambda tmp: (tmp / "sub").mkdir())
    assert sorted(p.name for p in target.iterdir()) == ["meta.json", "sub"]  # the old a.txt is gone with its directory
    assert (target / "meta.json").read_text() == '{"n": 2}'
    assert [p.name for p in tmp_path.iterdir()] == ["step-000000001"]


def test_a_directory_write_that_fails_leaves_the_old_directory_and_no_temporary(tmp_path):
    target = tmp_path / "ckpt"
    storage.write_dir(target, {"meta.json": "old"})

    def fill(tmp: Path) -> None:
        (tmp / "model.pt").write_bytes(b"half")  # test data, written into the owner's temporary directory
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        storage.write_dir(target, {"meta.json": "new"}, fill=fill)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]
    assert (target / "meta.json").read_text() == "old"


def test_a_directory_write_that_must_not_replace_keeps_the_copy_already_there(tmp_path):
    target = tmp_path / "cache"
    storage.write_dir(target, {"meta.json": "first"}, replace=False)
    storage.write_dir(target, {"meta.json": "second"}, replace=False)
    assert (target / "meta.json").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]


def test_several_files_are_written_whole_in_order(tmp_path):
    storage.write_files(tmp_path / "site", {"index.html": "<p>", "stamp.json": b"{}"})
    assert {p.name: p.read_bytes() for p in (tmp_path / "site").iterdir()} == {"index.html": b"<p>", "stamp.json": b"{}"}
    storage.delete(tmp_path / "site")
    assert not (tmp_path / "site").exists()
    storage.delete(tmp_path / "nowhere")  # nothing to remove: nothing happens
