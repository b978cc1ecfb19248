"""`abacus_ray.storage` owns every read and write of run data: its whole-directory write (what a
checkpoint is written with) behaves atomically, and no other module reads, writes, renames or
removes files itself beyond a short, named allow-list."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from abacus_ray import storage

REPO = Path(__file__).resolve().parents[1]
OWNER = ("storage",)  # how modules import the owner: `storage.write_text(...)`
MODULE_CALLS = {  # module alias -> functions that read, write, move or remove files
    "os": {"replace", "rename", "renames", "remove", "unlink", "rmdir", "removedirs", "open",
           "fdopen", "truncate", "link", "symlink", "makedirs", "mkdir"},
    "io": {"open"}, "shutil": None, "pafs": None, "pq": None,  # None: any function of it
    "torch": {"save", "load"}, "np": {"save", "savez", "load", "fromfile"},
    "pd": {"read_parquet", "read_csv"},
}
METHODS = {  # on a Path, a pyarrow file system or a DataFrame: file IO whatever the object's name
    "read_text", "read_bytes", "write_text", "write_bytes", "open", "unlink", "rmdir", "mkdir",
    "touch", "symlink_to", "hardlink_to", "open_input_stream", "open_input_file",
    "open_output_stream", "open_append_stream", "delete_file", "delete_dir", "delete_dir_contents",
    "copy_file", "create_dir", "get_file_info", "to_parquet", "to_csv",
}
MODULES = ("shutil", "pyarrow.fs", "pyarrow.parquet", "pyarrow.dataset")  # importing one is file IO
ALLOWED = {  # file -> the IO it may do itself, none of it run data
    "abacus_ray/api/checks.py": {".mkdir"},  # the driver's working directory
    "abacus_ray/evaluation/problem_file.py": {".read_bytes"},  # a problem file on this machine
    "abacus_ray/model/checkpoint.py": {"torch.save", "torch.load", "open"},  # in write_dir's fill,
    # or reading the local copy `fetch` made
    "abacus_ray/model/official_files.py": {"open", ".read_text"},  # an official one, imported
    "abacus_ray/model/unsafe.py": {"open"},  # a weights file scanned for code before it is loaded
    "dashboards/build.py": {".mkdir"},  # the site's own folders
    "dashboards/data.py": {"import pyarrow.fs", ".get_file_info"},  # a part's size and mtime
    "dashboards/paper_values.py": {".read_text"},  # a data file shipped with the package
    # the scripts beside the package: none of this is run data
    "benchmarks/cpu_throughput.py": {".read_text"},  # /proc/cpuinfo
    "benchmarks/census.py": {".read_text"},  # /proc/net/tcp{,6}
    "benchmarks/gpu/bundle.py": {"import shutil", "shutil.rmtree", ".unlink", ".open"},
    # ^ the wheels it trims in a temporary directory, and the tarball it packs in memory
    "benchmarks/soak.py": {"import shutil", "shutil.rmtree"},  # each round's scratch storage
    "benchmarks/storage_s3.py": {"import shutil", "shutil.rmtree"},  # its scratch directory
    "benchmarks/suite_cpu.py": {"import shutil", "shutil.which", ".read_bytes"},
    # ^ the kernel's process-accounting file
}
ROOTS = ("abacus_ray", "dashboards", "benchmarks", "docs", "examples", "sweeps")


def file_io(tree: ast.AST) -> list[tuple[int, str]]:
    """Every direct file operation in a module: (line, what), e.g. (12, "open")."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            found += [(node.lineno, f"import {n}") for n in names if n in MODULES]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append((node.lineno, "open"))
        if not isinstance(func, ast.Attribute):
            continue
        owner = func.value.id if isinstance(func.value, ast.Name) else None
        if owner in MODULE_CALLS:
            calls = MODULE_CALLS[owner]
            if calls is None or func.attr in calls:
                found.append((node.lineno, f"{owner}.{func.attr}"))
        elif owner not in OWNER and func.attr in METHODS:
            found.append((node.lineno, f".{func.attr}"))
    return found


def test_only_the_storage_owner_reads_writes_moves_or_removes_files():
    """Outside `abacus_ray/storage/`, a module (the package's, or a script's beside it) does file IO
    only as `ALLOWED` says."""
    found = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if not name.startswith("abacus_ray/storage/"):
                allowed = ALLOWED.get(name, set())
                found += [f"{name}:{line}: {what}"
                          for line, what in file_io(ast.parse(path.read_text()))
                          if what not in allowed]
    assert found == []


def test_the_bypass_check_sees_every_kind_of_file_io():
    source = """
import shutil
import pyarrow.fs as pafs
from pyarrow import parquet as pq
open("x")
Path("x").write_bytes(b"")
Path("x").read_text()
os.replace("a", "b")
shutil.copytree("a", "b")
fs.open_input_stream("p")
pq.write_table(t, "p")
df.to_parquet("p")
torch.save(w, "p")
storage.write_text("x", "")
text.replace("a", "b")
"""
    assert [what for _, what in sorted(file_io(ast.parse(source)))] == [
        "import shutil", "import pyarrow.fs", "import pyarrow.parquet", "open", ".write_bytes",
        ".read_text", "os.replace", "shutil.copytree", ".open_input_stream", "pq.write_table",
        ".to_parquet", "torch.save"]


def test_a_directory_write_replaces_the_old_one_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "step-000000001"
    storage.write_dir(storage.on_disk(target), {"meta.json": "{}", "a.txt": "old"})
    storage.write_dir(storage.on_disk(target), {"meta.json": '{"n": 2}'},
                      fill=lambda tmp: (tmp / "sub").mkdir())
    assert sorted(p.name for p in target.iterdir()) == ["meta.json", "sub"]  # the old a.txt is gone with its directory
    assert (target / "meta.json").read_text() == '{"n": 2}'
    assert [p.name for p in tmp_path.iterdir()] == ["step-000000001"]


def test_a_directory_write_that_fails_leaves_the_old_directory_and_no_temporary(tmp_path):
    target = tmp_path / "ckpt"
    storage.write_dir(storage.on_disk(target), {"meta.json": "old"})

    def fill(tmp: Path) -> None:
        (tmp / "model.pt").write_bytes(b"half")  # test data, written into the owner's temporary directory
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        storage.write_dir(storage.on_disk(target), {"meta.json": "new"}, fill=fill)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]
    assert (target / "meta.json").read_text() == "old"


def test_a_directory_write_that_must_not_replace_keeps_the_copy_already_there(tmp_path):
    target = tmp_path / "cache"
    storage.write_dir(storage.on_disk(target), {"meta.json": "first"}, replace=False)
    storage.write_dir(storage.on_disk(target), {"meta.json": "second"}, replace=False)
    assert (target / "meta.json").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]


def test_several_files_are_written_whole_in_order(tmp_path):
    site = storage.on_disk(tmp_path / "site")
    storage.write_files(site, {"index.html": "<p>", "stamp.json": b"{}"})
    assert {p.name: p.read_bytes() for p in (tmp_path / "site").iterdir()} == {"index.html": b"<p>", "stamp.json": b"{}"}
    storage.delete(storage.on_disk(tmp_path / "site"))
    assert not (tmp_path / "site").exists()
    storage.delete(storage.on_disk(tmp_path / "nowhere"))  # nothing to remove: nothing happens


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = node.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs]


def test_places_are_resolved_once_and_storage_takes_the_location():
    """Below the command line a place travels as a `Location`: storage's file and directory
    functions take one (annotated, never a `str` union to resolve again), and no parameter or
    import alias is called `storage` beside the module of that name."""
    loose, shadowing = [], []
    for path in sorted([*(REPO / "abacus_ray").rglob("*.py"), *(REPO / "dashboards").rglob("*.py")]):
        name = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                shadowing += [f"{name}:{node.lineno}: {node.name}({p.arg})"
                              for p in _params(node) if p.arg == "storage"]
                if name in ("abacus_ray/storage/files.py", "abacus_ray/storage/dirs.py") \
                        and not node.name.startswith("_"):
                    loose += [f"{name}:{node.lineno}: {node.name}({p.arg})" for p in _params(node)
                              if p.annotation is None or "Location" in ast.unparse(p.annotation)
                              and "str" in ast.unparse(p.annotation)]
            if isinstance(node, ast.alias) and node.asname == "storage_module":
                shadowing.append(f"{name}: import storage as storage_module")
    assert loose == [] and shadowing == []


# the checkpoint, results and training layers: resolved places in, never a union converted again
LOCATION_TAKERS = ("abacus_ray/model/checkpoint.py", "abacus_ray/evaluation/results.py",
                   "abacus_ray/training/loop.py")


def _union_params(source: str) -> list[str]:
    """Parameters of the public functions (and public methods) in `source` whose annotation joins
    a `Location` with a `str` or a `Path`, or a `Path` with a `str`: a place each function would
    resolve again."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_") \
                or isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for p in _params(node):
                ann = ast.unparse(p.annotation) if p.annotation is not None else ""
                if "Location" in ann and ("str" in ann or "Path" in ann) \
                        or "Path" in ann and "str" in ann:
                    found.append(f"{node.lineno}: {node.name}({p.arg}: {ann})")
    return found


def test_the_checkpoint_results_and_training_layers_take_a_location_never_a_union():
    """Below the command line a checkpoint or results place is a `Location` (a `Path` where only
    this disk is meant): the public functions of the checkpoint, results and training-loop modules
    take one, never `str | Path | Location` or `str | Path` to resolve."""
    loose = {name: _union_params((REPO / name).read_text()) for name in LOCATION_TAKERS}
    assert loose == {name: [] for name in LOCATION_TAKERS}
    # the check sees such a parameter
    assert _union_params("def f(a: str | Path | Location): ...") == ["1: f(a: str | Path | Location)"]
    assert _union_params("def f(a: str | Path | None): ...") == ["1: f(a: str | Path | None)"]


# where a path or URI given as text may be parsed: the command line, a standalone page's `main`,
# and `checkpoint.located` for a checkpoint as our own records hold it
RESOLVERS = {"abacus_ray/model/checkpoint.py": "located", "dashboards/timeline.py": "main"}


def _resolve_calls(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function) of every `storage.resolve(...)` call in `source`."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            found += [(node.lineno, fn.name) for node in ast.walk(fn) if isinstance(node, ast.Call)
                      and ast.unparse(node.func) == "storage.resolve"]
    return found


def test_text_is_resolved_into_a_location_only_at_the_edge():
    """Below the edge (the command line and the Python API) no module parses a path or URI again:
    a `Location` travels (a DataFrame column included), and a checkpoint a results row records is
    parsed by `checkpoint.located` alone."""
    loose = []
    for path in sorted([*(REPO / "abacus_ray").rglob("*.py"), *(REPO / "dashboards").rglob("*.py")]):
        name = path.relative_to(REPO).as_posix()
        if not name.startswith(("abacus_ray/cli/", "abacus_ray/api/", "abacus_ray/storage/")):
            loose += [f"{name}:{line}: {fn}" for line, fn in _resolve_calls(path.read_text())
                      if RESOLVERS.get(name) != fn]
    assert loose == []
    assert _resolve_calls("def f(d):\n    return storage.resolve(d).parent") == [(2, "f")]


def test_a_location_is_not_resolved_again(tmp_path):
    loc = storage.resolve(tmp_path)
    with pytest.raises(TypeError, match="already a Location"):
        storage.resolve(loc)
    with pytest.raises(TypeError, match="a URI, not a path on this disk"):
        storage.on_disk("s3://bucket/x")
    assert storage.on_disk(tmp_path) == loc
