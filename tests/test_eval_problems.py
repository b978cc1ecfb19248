"""`eval --problems FILE`: problems written the way people write them, scored like the grid's."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest
import torch

from abacus_ray.cli import main
from abacus_ray.config import EvalConfig, preset
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.problem_file import (
    natural,
    parse_line,
    read_problem_file,
    score_problem_set,
)
from abacus_ray.evaluation.results import read_cells, read_problems, read_samples
from abacus_ray.evaluation.runner import score_cells
from abacus_ray.model.checkpoint import save_checkpoint
from abacus_ray.model.transformer import ArithmeticTransformer
from abacus_ray.storage import on_disk
from abacus_ray.tasks.evalsets import eval_problems
from tests.test_eval_runner import FlawedOracle


def natural_line(prompt: str) -> str:
    """A model-format arithmetic prompt ("A_r+B_r=", reversed) as a person writes it ("A+B")."""
    body = prompt[:-1]
    op = next(ch for ch in body if ch in "+-x")
    a, b = body.split(op)
    return f"{a[::-1]}{'*' if op == 'x' else op}{b[::-1]}"


@pytest.mark.parametrize("task, i, j", [("add", 3, 5), ("sub", 4, 6), ("mul", 3, 2)])
def test_natural_lines_become_the_eval_sets_problems(task, i, j):
    for p in eval_problems(task, i, j, 20, 7):
        cell, problem, answer = parse_line(natural_line(p.prompt), task, "none")
        assert (cell, problem) == (Cell(task, i, j), p)
        assert natural(task, p.answer) == answer


def test_hints_or_and_sort_lines():
    hinted = eval_problems("add", 3, 4, 5, 0, index_hints="cyclic")
    for p in hinted:
        digits = "".join(ch for ch in p.prompt if ch in "0123456789+=")
        cell, problem, _ = parse_line(natural_line(digits), "add", "cyclic")
        assert (cell, problem) == (Cell("add", 3, 4), p)  # eval hints start at the first symbol
    for p in eval_problems("or", 4, 6, 4, 0):
        assert parse_line(p.prompt, "or", "none")[:2] == (Cell("or", 4, 6), p)
    cell, problem, answer = parse_line("3705,640,65461,79", "sort", "none")
    assert cell == Cell("sort", 5, 4) and answer == "79,640,3705,65461"
    labels = dict(part.split(":") for part in problem.prompt[:-1].split(","))
    assert [int(labels[lab][::-1]) for lab in problem.answer.split(",")] == [79, 640, 3705, 65461]


def test_a_file_of_grid_problems_gets_the_grids_verdicts(tmp_path):
    """Two cells' problems, interleaved in the file: each problem gets the verdict, first wrong position,
    error class and prediction the grid path gave it (the oracle gets about two thirds right)."""
    ckpt = SimpleNamespace(model=FlawedOracle().eval(), config=preset("tiny"), model_id="oracle", path="memory")
    cells = [Cell("add", 3, 2), Cell("add", 7, 5)]
    eval_cfg = EvalConfig(per_cell=10, seed=2)
    _, samples = score_cells(ckpt, cells, eval_cfg, samples=True)
    by_cell = [[s for s in samples if (s["i"], s["j"]) == (c.i, c.j)] for c in cells]
    interleaved = [s for pair in zip(*by_cell, strict=True) for s in pair]
    f = tmp_path / "p.txt"
    f.write_text("# two cells\n\n" + "\n".join(natural_line(s["prompt"]) for s in interleaved) + "\n")
    cell_rows, rows = score_problem_set(ckpt, read_problem_file(f, ckpt.config), eval_cfg)
    assert [r["line"] for r in rows] == list(range(3, 3 + len(interleaved)))
    for s, r in zip(interleaved, rows, strict=True):
        assert (r["correct"], r["first_wrong"], r["error"], r["output"]) == \
            (s["correct"], s["first_wrong"], s["error"], s["prediction"])
        assert r["prompt"] == s["prompt"] and r["target"] == s["target"]
    assert 0 < sum(r["correct"] for r in rows) < len(rows)
    assert [(r["i"], r["j"], r["n"], r["per_cell"]) for r in cell_rows] == [(3, 2, 10, 0), (7, 5, 10, 0)]


@pytest.fixture(scope="module")
def noisy_checkpoint(tmp_path_factory):
    """An untrained tiny model whose initial state is noise: verdicts depend on the per-cell noise."""
    cfg = preset("tiny")
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ckpt") / "model"
    save_checkpoint(on_disk(path), ArithmeticTransformer.for_experiment(cfg), cfg, {"step": 0})
    return path


def test_cli_problem_file_reproduces_a_grid_cell(tmp_path, noisy_checkpoint, capsys):
    grid = tmp_path / "grid"
    assert main(["eval", str(noisy_checkpoint), "--cells", "2x3", "--per-cell", "6", "--seed", "4", "--samples",
                 "--out", str(grid), "--quiet"]) == 0
    samples = read_samples(on_disk(grid)).sort_values("index")
    f = tmp_path / "problems.txt"
    f.write_text("\n".join(natural_line(p) for p in samples["prompt"]))
    out = tmp_path / "res"
    assert main(["eval", str(noisy_checkpoint), "--problems", str(f), "--seed", "4", "--out", str(out)]) == 0
    rows = read_problems(on_disk(out)).sort_values("line")
    assert list(rows["output"]) == list(samples["prediction"])
    assert list(rows["correct"]) == list(samples["correct"])
    assert list(rows["first_wrong"]) == list(samples["first_wrong"])
    assert len(set(rows["output"])) > 1  # the noise and the prompts matter: not one constant output
    assert list(rows["problem"]) == f.read_text().split("\n")
    assert set(pq.read_schema(next((out / "problems").glob("part-*.parquet"))).names) >= \
        {"problem", "answer", "prediction", "correct", "first_wrong", "error"}
    cells = read_cells(on_disk(out))
    assert list(cells[["i", "j", "n", "per_cell"]].itertuples(index=False, name=None)) == [(2, 3, 6, 0)]
    capsys.readouterr()
    assert main(["eval", str(noisy_checkpoint), "--problems", str(f), "--seed", "4", "--out", str(out)]) == 0
    assert "already scored" in capsys.readouterr().out
    assert main(["summary", str(out)]) == 0
    # the dashboard reads this layout too (its entry counts once collided with the `problems` column)
    assert main(["dashboard", str(out), "--out", str(tmp_path / "site")]) == 0
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.mark.parametrize("text, culprit", [
    ("12+34\n12+x4\n", ":2: '12+x4'"),
    ("12*34\n", ":1: '12*34': operator '*' is not the model's task (add)"),
    ("1" * 1001 + "+1\n", ":1: '" + "1" * 40 + "\u2026': an operand of 1001 digits"),
    ("12+34\n\n\n  7 - \n", ":4:"),
    ("12+34\n\u0661\u0662+\u0663\n", ":2: '١٢+٣': '١' (U+0661) is not ASCII"),  # Arabic-Indic digits
    ("\uff11\uff12+34\n", ":1: '１２+34': '１' (U+FF11) is not ASCII"),  # full-width digits
    ("12+34\n1 2+3\n", ":2: '1 2+3': a space inside a number"),  # not silently 12+3
    ("12+34\n12+3\x0c4\n", ":2:"),  # a form feed: one line to an editor, two to str.splitlines
    ("12+34\r\n5+6\u20282+2\n", ":2:"),  # so is a line separator
    # longer than the model's Abacus table: was blamed on "the grid", without its line
    ("12+34\n" + "1" * 300 + "+1\n", ":2: '" + "1" * 40 + "\u2026': model.abacus_table: cell add "
     "300x1 needs 302 Abacus rows"),
])
def test_bad_lines_name_their_line(tmp_path, noisy_checkpoint, capsys, text, culprit):
    """Each bad line is refused naming the file and the line, before the weights are loaded: the
    checkpoint here has a corrupt model.pt, which the refusal does not reach."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(noisy_checkpoint, ckpt)
    (ckpt / "model.pt").write_bytes(b"not weights")
    f = tmp_path / "p.txt"
    f.write_bytes(text.encode())
    capsys.readouterr()
    assert main(["eval", str(ckpt), "--problems", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{f}{culprit}" in err, err
    assert not (tmp_path / "out").exists()


def test_spaces_around_operators_are_no_part_of_a_problem(tmp_path):
    spaced, plain = tmp_path / "spaced.txt", tmp_path / "plain.txt"
    spaced.write_text(" 12 + 34 \n5\t+6 =\n 900 - 45=\n")
    plain.write_text("12+34\n5+6\n900-45\n")
    cfg = preset("tiny", ["task.name=addsub"])
    problems = [[(p.line, p.cell, p.problem) for p in read_problem_file(f, cfg).problems] for f in (spaced, plain)]
    assert problems[0] == problems[1] and len(problems[0]) == 3


def test_files_are_bounded_before_work(tmp_path, noisy_checkpoint, capsys, monkeypatch):
    from abacus_ray.evaluation import problem_file

    monkeypatch.setattr(problem_file, "MAX_LINES", 3)
    f = tmp_path / "p.txt"
    f.write_text("1+1\n" * 4)
    assert main(["eval", str(noisy_checkpoint), "--problems", str(f), "--out", str(tmp_path / "out")]) == 2
    assert "4 lines; a problem file may hold at most 3" in capsys.readouterr().err
    f.write_text("# nothing\n")
    assert main(["eval", str(noisy_checkpoint), "--problems", str(f), "--out", str(tmp_path / "out")]) == 2
    assert "holds no problems" in capsys.readouterr().err
    assert main(["eval", str(noisy_checkpoint), str(noisy_checkpoint), "--problems", str(f),
                 "--out", str(tmp_path / "out")]) == 2
    assert "--problems: scores one checkpoint" in capsys.readouterr().err
