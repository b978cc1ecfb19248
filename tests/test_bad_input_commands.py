"""Bad input is refused (5/5): every subcommand with hostile arguments, as a new user might type them.

Files of the wrong kind (the README as a sweep, a checkpoint or a results directory; a directory where
a file goes; a file where a directory goes), sweep files that do not run (a syntax error, an exception,
no SWEEP), names holding control characters, flags blaming the wrong option, and URIs everywhere a path
goes: s3:// with an unreachable endpoint, gs:// without credentials, credentials inside the URI, a
bucketless s3:///, a file:// URI with a host, unknown schemes. Each case: exit 2, one stderr line naming
the argument as typed, nothing written (in the working directory either: a URI never becomes a local
`s3:` folder), no Ray started. No network: the endpoint is a closed loopback port and the Google
credentials file does not exist, so every remote refusal is immediate.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
from refusal import REPO, assert_refused

COMMANDS = ("describe", "train", "eval", "eval-all", "import-official", "sweep", "plan", "summary", "dashboard")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No object store can be reached, fast, and the working directory is a fresh one (in `roots`)."""
    for key, value in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
                       "AWS_SECRET_ACCESS_KEY": "not-a-secret", "AWS_EC2_METADATA_DISABLED": "true",
                       "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "no-such-credentials.json")}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


@pytest.fixture(scope="module")
def places(ckpt, work) -> dict[str, Path]:
    """Every kind of argument the commands take, good and bad, made once."""
    from test_import_official import official_arch, official_tensors, write_official

    from dashboards.sample import synthetic_results

    root = work / "hostile"
    (root / "a-dir").mkdir(parents=True)
    (root / "a-dir.py").mkdir()
    (root / "syntax.py").write_text("SWEEP = Sweep(\n")
    (root / "raises.py").write_text("raise RuntimeError('a sweep file that fails')\n")
    (root / "no_sweep.py").write_text("X = 1\n")
    (root / "exits.py").write_text("raise SystemExit(0)\n")
    shutil.copytree(ckpt, root / "runs" / "run-a" / "step-000000001")
    arch = official_arch("abacus", 1, 1, False)
    write_official(root / "official", arch, official_tensors(arch))
    synthetic_results(root / "sweep" / "results", [("s/run", [])], [(1, 1)], per_cell=4)
    return {"readme": REPO / "README.md", "dir": root / "a-dir", "dir_py": root / "a-dir.py",
            "syntax": root / "syntax.py", "raises": root / "raises.py", "no_sweep": root / "no_sweep.py",
            "exits": root / "exits.py", "ckpt": ckpt, "runs": root / "runs", "official": root / "official", "results": root / "sweep" / "results",
            "root": root}


def _fill(argv: list[str], places: dict[str, Path], fresh: Path, **more: str) -> list[str]:
    return [a.format(fresh=fresh, **{k: str(v) for k, v in places.items()}, **more) for a in argv]


# --- URIs everywhere a path goes ----------------------------------------------------------------------

URIS = {
    "s3-unreachable": "s3://abacus-hostile/x",
    "gs-no-credentials": "gs://abacus-hostile/x",
    "credentials-inside": "s3://AKIDEXAMPLE:not-a-secret@abacus-hostile/x",
    "no-bucket": "s3:///x",
    "file-with-a-host": "file://somehost/x",
    "unknown-scheme": "foo://abacus-hostile/x",
    "http": "http://example.invalid/x",
    # a secret in the query, named or bare, on each path of the parser: never echoed
    "secret-in-query": "s3://abacus-hostile/x?secret_key=not-a-secret&endpoint_override=127.0.0.1:9",
    "bare-token-in-query": "s3://abacus-hostile/x?not-a-secret",
    "gs-token-in-query": "gs://abacus-hostile/x?token=not-a-secret#not-a-secret",
    "file-with-a-query": "file:///x?token=not-a-secret",
    "no-bucket-with-a-query": "s3:///x?access_key=not-a-secret",
    "broken-host-with-a-query": "s3://[abacus-hostile/x?token=not-a-secret",
}
SLOTS = [  # (argv with {uri}, the argument a refusal must name)
    (["describe", "{uri}"], "CHECKPOINT"),
    (["train", "--out", "{uri}", "--device", "cpu", "--set", "train.max_steps=1"], "--out"),
    (["train", "--out", "{uri}", "--resume", "--device", "cpu"], "--out"),
    (["eval", "{uri}", "--out", "{fresh}/o", "--cells", "1x1", "--quiet"], "CHECKPOINT"),
    (["eval", "{ckpt}", "{uri}", "--out", "{fresh}/o", "--cells", "1x1", "--quiet"], "CHECKPOINT"),
    (["eval", "{ckpt}", "--out", "{uri}", "--cells", "1x1", "--quiet"], "--out"),
    (["eval", "{ckpt}", "--out", "{fresh}/o", "--problems", "{uri}"], "--problems"),
    (["eval-all", "{uri}"], "RESULTS"),
    (["eval-all", "{runs}", "--out", "{uri}"], "--out"),
    (["import-official", "{uri}", "--out", "{fresh}/o"], "DIR"),
    (["import-official", "{official}", "--out", "{uri}"], "--out"),
    (["sweep", "{uri}", "--dry-run"], "NAME"),
    (["sweep", "fig10_k", "--dry-run", "--storage", "{uri}"], "--storage"),
    (["sweep", "fig10_k", "--max-trials", "1", "--storage", "{uri}"], "--storage"),
    (["plan", "{uri}"], "NAME"),
    (["summary", "{uri}"], "RESULTS"),
    (["dashboard", "{uri}", "--out", "{fresh}/site"], "RESULTS"),
    (["dashboard", "{results}", "--out", "{uri}"], "--out"),
]


@pytest.mark.parametrize("uri", sorted(URIS))
def test_uris_everywhere_a_path_goes(uri, places, offline, work, no_ray):
    fresh = Path(offline.parent / "fresh")
    fresh.mkdir()
    assert {argv[0] for argv, _ in SLOTS} == set(COMMANDS)
    for argv, culprit in SLOTS:
        filled = _fill(argv, places, fresh, uri=URIS[uri])
        message = assert_refused(filled, culprit, "hostile arguments: URIs", roots=[work, offline, fresh])
        assert "not-a-secret" not in message, message
    assert list(offline.iterdir()) == [] and list(fresh.iterdir()) == []


def test_a_100_kb_argument_is_refused_naming_its_flag_and_is_not_echoed(places, offline, work, no_ray):
    fresh = Path(offline.parent / "fresh")
    fresh.mkdir()
    for argv, culprit in SLOTS:
        filled = _fill(argv, places, fresh, uri="/tmp/" + "a" * 100_000)
        message = assert_refused(filled, f"{culprit}: 100,005 characters", "hostile arguments: a 100 KB path",
                                 roots=[work, offline, fresh])
        assert len(message) < 300, message
    # a value that is not refused for its length is cut where a message repeats it
    message = assert_refused(["describe", "--seq-len", "x" * 4000], "--seq-len: invalid int value",
                             "hostile arguments: a 100 KB path", roots=[work, offline, fresh])
    assert len(message) < 300, message


def test_a_dry_run_probes_storage_as_the_run_does(places, offline, work, unwritable, no_ray):
    """`sweep --dry-run` passes only where the run could start: the storage probe of the real run refuses a
    read-only directory and a bucket without credentials, in the same words."""
    if unwritable is None:
        pytest.skip("no unwritable directory on this machine")
    for storage in (str(unwritable / "sub"), URIS["gs-no-credentials"]):
        messages = [assert_refused(["sweep", "fig10_k", *flags, "--storage", storage], "--storage",
                                   "hostile arguments: URIs", roots=[work, offline]) for flags in (["--dry-run"], [])]
        assert messages[0] == messages[1]
    assert "no usable Google credentials" in messages[0]


def test_file_uris_are_their_local_paths(places, offline, work, no_ray):
    """file:///... is honoured as the path it names: refused (or not) as that path would be."""
    fresh = offline.parent / "fresh"
    fresh.mkdir()
    cases = [(["describe", "file://{fresh}/missing"], "{fresh}/missing: no such checkpoint directory"),
             (["eval", "{ckpt}", "--out", "{fresh}/o", "--problems", "file://{dir}"], "{dir}: is a directory"),
             (["import-official", "file://{readme}", "--out", "{fresh}/o"], "{readme}: is a file, not"),
             (["sweep", "file://{syntax}", "--dry-run"], "{syntax}:1: syntax error"),
             (["train", "--out", "file://{readme}", "--device", "cpu"], "--out: {readme} exists and is not a directory")]
    for argv, culprit in cases:
        assert_refused(_fill(argv, places, fresh), _fill([culprit], places, fresh)[0], "hostile arguments: URIs",
                       roots=[work, offline, fresh])


# --- files of the wrong kind, sweep files that do not run ---------------------------------------------

WRONG_KIND = [
    (["describe", "{readme}"], "{readme}"),
    (["describe", "{dir}"], "{dir}"),
    (["train", "--out", "{readme}", "--device", "cpu"], "--out"),
    (["train", "--out", "{readme}/sub", "--device", "cpu"], "--out"),
    (["train", "--out", "{dir}", "--resume", "--device", "cpu"], "--resume"),
    (["eval", "{readme}", "--out", "{fresh}/o", "--cells", "1x1", "--quiet"], "{readme}"),
    (["eval", "{dir}", "--out", "{fresh}/o", "--cells", "1x1", "--quiet"], "{dir}"),
    (["eval", "{ckpt}", "--out", "{readme}", "--cells", "1x1", "--quiet"], "--out"),
    (["eval", "{ckpt}", "--out", "{fresh}/o", "--problems", "{dir}"], "{dir}: is a directory, not a problem file"),
    (["eval", "{ckpt}", "--out", "{fresh}/o", "--problems", "{readme}"], "{readme}:"),
    (["eval", "{ckpt}", "--out", "{fresh}/o", "--problems", "{ckpt}/model.pt"], "{ckpt}/model.pt"),
    (["eval-all", "{readme}"], "RESULTS"),
    (["eval-all", "{dir}"], "RESULTS"),
    (["eval-all", "{runs}", "--out", "{readme}"], "--out"),
    (["import-official", "{readme}", "--out", "{fresh}/o"], "{readme}: is a file, not an official checkpoint"),
    (["import-official", "{dir}", "--out", "{fresh}/o"], "{dir}/model_config.json: missing"),
    (["import-official", "{ckpt}", "--out", "{fresh}/o"], "{ckpt}/model_config.json: missing"),
    (["import-official", "{official}", "--out", "{readme}"], "--out"),
    (["import-official", "{official}", "--out", "{ckpt}"], "--out: {ckpt} exists and is not empty"),
    (["sweep", "{readme}", "--dry-run"], "NAME: {readme} is not a sweep file"),
    (["sweep", "{dir}", "--dry-run"], "{dir}: is a directory, not a sweep file"),
    (["sweep", "{dir_py}", "--dry-run"], "{dir_py}: is a directory, not a sweep file"),
    (["sweep", "{syntax}", "--dry-run"], "{syntax}:1: syntax error"),
    (["sweep", "{raises}", "--dry-run"], "{raises}: does not run: RuntimeError: a sweep file that fails"),
    (["sweep", "{no_sweep}", "--dry-run"], "{no_sweep}: declares no SWEEP"),
    # sys.exit(0) while read used to end the command with status 0 and nothing said
    (["sweep", "{exits}", "--dry-run"], "{exits}: exited (SystemExit(0)) while it was read"),
    (["sweep", "{fresh}/missing.py", "--dry-run"], "{fresh}/missing.py: no such sweep file"),
    (["sweep", "fig10_k", "--dry-run", "--storage", "{readme}"], "--storage"),
    (["sweep", "fig10_k", "--dry-run", "--storage", "{readme}/sub"], "--storage"),
    (["plan", "{readme}"], "NAME: {readme} is not a sweep file"),
    (["plan", "{dir}"], "{dir}: is a directory, not a sweep file"),
    (["plan", "{syntax}"], "{syntax}:1: syntax error"),
    (["plan", "{raises}"], "{raises}: does not run"),
    (["plan", "fig10_k", "{no_sweep}"], "{no_sweep}: declares no SWEEP"),
    (["summary", "{readme}"], "{readme}"),
    (["summary", "{dir}"], ("{dir}", "RESULTS")),
    (["summary", "{ckpt}"], ("{ckpt}", "RESULTS")),
    (["dashboard", "{readme}", "--out", "{fresh}/site"], ("{readme}", "RESULTS")),
    (["dashboard", "{ckpt}", "--out", "{fresh}/site"], ("{ckpt}", "RESULTS")),
    (["dashboard", "{results}", "--out", "{readme}"], "--out"),
]


@pytest.mark.parametrize("argv, culprit", WRONG_KIND, ids=[" ".join(a[:2]) for a, _ in WRONG_KIND])
def test_files_of_the_wrong_kind(argv, culprit, places, offline, work, no_ray):
    fresh = offline.parent / "fresh"
    fresh.mkdir()
    culprits = [culprit] if isinstance(culprit, str) else list(culprit)
    assert_refused(_fill(argv, places, fresh), _fill(culprits, places, fresh), "hostile arguments: wrong kind of file",
                   roots=[work, offline, fresh])
    assert list(fresh.iterdir()) == []


def test_every_command_meets_a_file_of_the_wrong_kind():
    assert {argv[0] for argv, _ in WRONG_KIND} == set(COMMANDS)


# --- names and flags: the argument as typed -----------------------------------------------------------

AS_TYPED = [
    (["describe", "--set", "name=two\nlines"], "name: 'two\\nlines' holds the control character U+000A"),
    (["describe", "--set", "name=tab\there"], "name: "),
    (["describe", "--set", "name=rtl\u202eoverride"], "name: "),
    (["train", "--out", "{fresh}/t", "--device", "cpu", "--set", "name=a\rb"], "name: "),
    (["eval", "{ckpt}", "--out", "{fresh}/o", "--cells", "1x1", "--run-id", "run\n1"], "--run-id: "),
    (["import-official", "{official}", "--out", "{fresh}/o", "--name", "model\nname"], "--name: "),
    (["import-official", "{official}", "--out", "{fresh}/o", "--train-max-len", "1000000000"], "--train-max-len: "),
    (["sweep", "fig10_k", "--dry-run", "--set", "name=x\x1b[31m"], "name: "),
    (["plan", "fig10_k", "--price", "FOO=1"], "--price: unknown GPU 'FOO'"),
    (["plan", "fig10_k", "--mfu", "FOO=0.3"], "--mfu: unknown GPU 'FOO'"),
    (["plan", "fig10_k", "--gpu", "H100", "--price", "A100=2"], "--price: 'A100=2' names A100, which is not planned"),
    (["plan", "fig10_k", "--set=--bogus"], "--set '--bogus'"),
    (["plan", "fig10_k", "--gpu", "FOO"], "--gpu: unknown GPU 'FOO'"),
]


@pytest.mark.parametrize("argv, culprit", AS_TYPED, ids=[" ".join(a[:2]) for a, _ in AS_TYPED])
def test_names_and_flags_are_blamed_as_typed(argv, culprit, places, offline, work, no_ray):
    fresh = offline.parent / "fresh"
    fresh.mkdir()
    assert_refused(_fill(argv, places, fresh), culprit, "hostile arguments: names and flags as typed",
                   roots=[work, offline, fresh])
    assert list(fresh.iterdir()) == []


@pytest.mark.slow  # over a second: out of the fast tier
def test_sweep_new_writes_a_template_that_runs_as_written(tmp_path, capsys, no_ray):
    """`sweep --new PATH`: a commented sweep file with its __main__ block and a CLAIM; its dry run
    expands, by NAME and as a script; an existing file is never overwritten."""
    import json
    import subprocess
    import sys

    from abacus_ray.cli import main

    path = tmp_path / "my_exp.py"
    assert main(["sweep", "--new", str(path)]) == 0
    text = path.read_text()
    assert 'if __name__ == "__main__":' in text and "CLAIM = Claim(" in text
    capsys.readouterr()
    assert main(["sweep", str(path), "--dry-run", "--storage", str(tmp_path / "runs")]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["sweep"] == "my_exp" and len(plan["trials"]) == 2 and plan["claim"]["figure"]
    done = subprocess.run([sys.executable, str(path), "--dry-run", "--storage",
                           str(tmp_path / "runs")], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and json.loads(done.stdout)["sweep"] == "my_exp", done.stderr
    before = path.read_text()
    assert main(["sweep", "--new", str(path)]) == 2 and path.read_text() == before
    assert "exists; choose another name" in capsys.readouterr().err
    # a grid bound to another task's problems is refused at the dry run, before any training
    assert main(["sweep", "fig3_embeddings", "--set", "task.name=sub", "--dry-run", "--storage",
                 str(tmp_path / "runs")]) == 2
    assert "'tiny-addition' holds 'add' problems, but the sweep trains on 'sub'" in \
        capsys.readouterr().err
