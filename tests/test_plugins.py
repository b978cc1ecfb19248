"""A position scheme and a task of one's own (`examples/alibi.py`, `examples/add3.py`) through the
command line and through Ray.

The plugin is loaded by `--plugin FILE` in a fresh process each time, as a user runs it: the
checkpoint records it, reading that checkpoint without it is one line naming the module, and a
sweep ships the file to its Ray workers (the trials train it and the evaluators score it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pace import deadline

from abacus_ray.evaluation.results import read_cells
from abacus_ray.storage import on_disk

pytestmark = pytest.mark.cost(100)  # seconds in `make test`: its place in the order (conftest)

REPO = Path(__file__).resolve().parents[1]
ALIBI = REPO / "examples" / "alibi.py"
ADD3 = REPO / "examples" / "add3.py"


def _cli(*args: object, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "abacus_ray.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=deadline(timeout))


@pytest.mark.slow
def test_a_plugin_trains_is_recorded_and_is_needed_to_read_its_checkpoint(tmp_path):
    run = tmp_path / "run"
    done = _cli("train", "--plugin", ALIBI, "--set", "model.positions=alibi", "--set",
                "train.max_steps=4", "--device", "cpu", "--out", run, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (step,) = run.glob("step-*")
    assert json.loads((step / "config.json").read_text())["plugins"] == ["alibi"]
    refused = _cli("eval", run, "--cells", "1-2x1-2", "--out", tmp_path / "r1", cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "needs the plugin module 'alibi'" in line and "--plugin" in line, line
    scored = _cli("eval", run, "--plugin", ALIBI, "--cells", "1-2x1-2", "--out", tmp_path / "r2",
                  cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    unknown = _cli("train", "--set", "model.positions=alibi", "--out", tmp_path / "x", cwd=tmp_path)
    assert unknown.returncode == 2 and "model.positions: 'alibi' is not one of" in unknown.stderr


@pytest.mark.slow
@pytest.mark.ray
def test_a_sweep_ships_the_plugins_to_its_ray_workers(tmp_path):
    store = tmp_path / "store"
    done = _cli("sweep", "fig10_k", "--plugin", ALIBI, "--plugin", ADD3, "--set",
                "model.positions=abacus+alibi", "--set", "task.name=add3",
                "--set", "train.max_steps=10", "--per-cell", "2", "--no-dashboard",
                "--max-trials", "1", "--tracking", "none", "--storage", store, cwd=tmp_path,
                timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    cells = read_cells(on_disk(store / "fig10_k" / "results"))
    assert set(cells["model.positions"]) == {"abacus+alibi"} and cells["run_id"].nunique() == 1
    assert set(cells["task"]) == {"add3"}


def test_a_task_of_ones_own_is_a_config_choice_and_its_problems_are_pure(monkeypatch):
    import example_plugin  # noqa: F401  (registers examples/add3.py)

    from abacus_ray import plugins
    from abacus_ray.config import preset
    from abacus_ray.config.task import longest_digit_run
    from abacus_ray.evaluation.problem_file import read_problem_file
    from abacus_ray.tasks import generate

    cfg = preset("tiny", {"task.name": "add3", "plugins": "add3"})
    assert cfg.task.tokenizer_name == "pad" and longest_digit_run("add3", 3, 2) == 14
    four, two = generate("add3", 3, 2, 4, seed=5), generate("add3", 3, 2, 2, seed=5)
    assert two == four[:2] and four == generate("add3", 3, 2, 4, seed=5)  # prefix, deterministic
    assert generate("add3", 3, 2, 4, seed=6) != four
    with pytest.raises(ValueError, match="'add3' is a plugin's: score it on a grid"):
        read_problem_file("unread.txt", cfg)  # problem files parse the built-in tasks only
    with pytest.raises(ValueError, match="'add' is built in"):
        plugins.register_task("add", lambda i, j, rng: ("1+1=", "2"), lambda i, j: 4)
    # a plugin that writes outside the vocabulary, or past its own bound, is named with its cell
    monkeypatch.setitem(plugins.TASKS, "bad", plugins.Task(lambda i, j, rng: ("1?1=", "2"),
                                                           lambda i, j: 9))
    with pytest.raises(ValueError, match=r"task 'bad': problem\(1, 1\) wrote '1\?1='"):
        generate("bad", 1, 1, 1, seed=0)
    monkeypatch.setitem(plugins.TASKS, "bad", plugins.Task(lambda i, j, rng: ("1+1=", "2"),
                                                           lambda i, j: 3))
    with pytest.raises(ValueError, match=r"past its longest_line\(1, 1\) = 3"):
        generate("bad", 1, 1, 1, seed=0)
