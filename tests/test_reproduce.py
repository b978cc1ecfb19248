"""`abacus-ray reproduce`: every figure and table sweep of the paper at CPU scale, priced before it
starts, refused in one line before Ray for bad input, resumed by the same command, ending with the
storage root's verdicts."""

from __future__ import annotations

import re

import pytest

from abacus_ray import figures
from abacus_ray.cli import main
from abacus_ray.cli.reproduce import paper_sweeps

pytestmark = pytest.mark.cost(90)  # seconds in `make test`: its place in the order (conftest)


@pytest.fixture
def no_ray(monkeypatch):
    """Fails the test if the command starts (or joins) Ray: a shared Ray may already run here."""
    from abacus_ray.cluster import runtime

    def refuse(*args, **kwargs):
        raise AssertionError("the command started Ray")

    monkeypatch.setattr(runtime, "init", refuse)


def test_the_reproduction_is_every_figure_and_table_in_the_papers_order():
    names = paper_sweeps()
    assert set(names) == {n for n in figures.names() if n != "extrapolation_10x"}
    numbers = [(n.startswith("table"), int(re.findall(r"\d+", n)[0])) for n in names]
    assert numbers == sorted(numbers) and names[0] == "fig3_embeddings"
    assert names[-2:] == ("table1_sorting", "table2_sorting_arch")


def test_a_dry_run_prices_every_sweep_and_starts_nothing(tmp_path, capsys, no_ray):
    assert main(["reproduce", "--dry-run", "--storage", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(rf"reproduce: {len(paper_sweeps())} sweeps, \d+ trials at CPU scale under "
                        rf".*; plan: [\d.]+ core-hours, [\d.]+ wall-hours on \d+ CPUs", out[0])
    assert tuple(out[1:]) == paper_sweeps()
    assert not any((tmp_path / "r").glob("fig*"))


@pytest.mark.parametrize("argv, culprit", [
    (["--only", "fig99"], "--only: 'fig99' is not a paper sweep"),
    (["--set", "train.lr=fast"], "fig3_embeddings: train.lr"),
    (["--only", "fig5_add_sub", "--set", "nope.key=1"], "fig5_add_sub: nope.key"),
])
def test_bad_input_is_one_line_before_anything_runs(tmp_path, capsys, no_ray, argv, culprit):
    assert main(["reproduce", "--storage", str(tmp_path / "r"), *argv]) == 2
    # the command's own lines (a Ray already running in this process may log to stderr too)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("abacus-ray")]
    assert len(said) == 1 and said[0].startswith(f"abacus-ray reproduce: error: {culprit}")
    assert not (tmp_path / "r").exists()


def test_a_sweep_that_fails_in_any_way_is_named_and_the_others_run(tmp_path, capsys, monkeypatch,
                                                                  no_ray):
    from abacus_ray.cli import reproduce

    ran = []

    def run(sweep, flags):
        ran.append(sweep.name)
        if sweep.name == "fig5_add_sub":
            raise RuntimeError("a fault of ours")
        return 0

    monkeypatch.setattr(reproduce, "run", run)
    monkeypatch.setattr(reproduce, "verdicts", lambda root: "(verdicts)")
    argv = ["reproduce", "--only", "fig5_add_sub,fig15_recurrence_outputs",
            "--storage", str(tmp_path / "r")]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert ran == ["fig5_add_sub", "fig15_recurrence_outputs"]
    assert "reproduce: fig5_add_sub: failed: RuntimeError: a fault of ours" in err
    assert out.strip().splitlines()[-1].endswith("failed: fig5_add_sub (rerun the same command to "
                                                 "resume)")


@pytest.mark.ray
def test_a_rerun_resumes_and_both_end_with_the_verdicts(tmp_path, capsys, monkeypatch, ray_local):
    """Two sweeps of a few steps under a relative `--storage`, each in its own directory side by
    side; the rerun trains and evaluates nothing new and prints the same table of verdicts."""
    monkeypatch.chdir(tmp_path)
    argv = ["reproduce", "--only", "fig5_add_sub,fig15_recurrence_outputs", "--storage", "r",
            "--set", "train.max_steps=20", "--set", "eval.per_cell=5",
            "--set", "cluster.trainer=function"]  # resuming, not Ray Train, is what is tested
    tables = []
    for _ in range(2):
        assert main(argv) == 0
        out, err = capsys.readouterr()
        lines = out.splitlines()
        head = next(i for i, line in enumerate(lines) if line.startswith("| sweep | figure | "))
        table = lines[head:head + 4]  # Tune's own status tables print lines like these too
        assert sorted(row.split(" | ")[0] for row in table[2:]) == [
            "| fig15_recurrence_outputs", "| fig5_add_sub"]
        assert sorted(p.name for p in (tmp_path / "r").iterdir()) == [
            "dashboard", "fig15_recurrence_outputs", "fig5_add_sub"]
        assert (tmp_path / "r" / "dashboard" / "index.html").is_file()
        tables.append(table)
    assert tables[0] == tables[1]
    assert set(re.findall(r"evaluated (\d+) cells \(\d+ already present\)", err)) == {"0"}


def test_ctrl_c_in_one_sweep_stops_the_reproduction(tmp_path, capsys, monkeypatch, no_ray):
    """Tune catches Ctrl-C and returns with its trials still placed; the next sweep then waited
    forever for workers. An interrupted sweep (status 130) now ends the whole run, resumable."""
    from abacus_ray.cli import reproduce

    ran = []
    monkeypatch.setattr(reproduce, "run", lambda sweep, flags: ran.append(sweep.name) or 130)
    monkeypatch.setattr(reproduce, "verdicts", lambda root: "(verdicts)")
    argv = ["reproduce", "--only", "fig5_add_sub,fig15_recurrence_outputs",
            "--storage", str(tmp_path / "r")]
    assert main(argv) == 130 and ran == ["fig5_add_sub"]
    assert "reproduce: interrupted; rerun the same command to resume" in capsys.readouterr().err
