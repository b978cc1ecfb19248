"""The Python API: the guide's example runs as written, and the API and the command line are one
path (the same sweep through both gives the same models and rows)."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.cost(110)  # seconds in `make test`: its place in the order (conftest)

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide.md"


def guide_example() -> str:
    """The guide's "From Python" code block."""
    section = GUIDE.read_text().split("### From Python", 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


@pytest.mark.slow  # a fresh interpreter: what an import loads cannot be seen in this one
def test_importing_the_api_loads_neither_torch_nor_ray():
    """`from abacus_ray import api` and its checks (which the command line imports at every
    `abacus-ray --help`) load no torch and no Ray; a sweep's names load Ray only once it runs."""
    import subprocess
    import sys

    code = ("import sys; from abacus_ray import api; import abacus_ray.api.checks; "
            "print('torch' in sys.modules, 'ray' in sys.modules); api.SweepOptions; api.prepare; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False"]


def test_bad_input_is_one_value_error_naming_the_option(tmp_path):
    from abacus_ray import api

    with pytest.raises(ValueError, match=r"^--max-trials: must be >= 1"):
        api.prepare("fig10_k", api.SweepOptions(storage=str(tmp_path), max_trials=0))
    with pytest.raises(ValueError, match=r"^--axis|model.no_such"):
        api.sweep("fig10_k", storage=str(tmp_path), axes={"model.no_such": [1]})
    assert not any(tmp_path.iterdir())  # nothing written before the refusal


@pytest.mark.ray
def test_the_guides_example_runs_as_written(ray_local, tmp_path, monkeypatch, capsys):
    """The example trains, scores and sweeps for real; its last line is the figure's verdict, and
    the sweep it ran is the one `abacus-ray sweep` runs with the same flags: that command, run into
    the same storage, finds its own sweep there (any other field would be refused as another sweep)
    and has nothing left to train or score."""
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(guide_example(), str(GUIDE), "exec"), {"__name__": "__guide__"})
    os.chdir(tmp_path)  # the sweep's driver moved into its storage
    text = printed.getvalue()
    assert (tmp_path / "runs" / "add").is_dir() and "TERMINATED" in text
    assert "Conclusion" in text.splitlines()[-1] or "Verdict" in text.splitlines()[-1]

    from abacus_ray import api
    from abacus_ray.cli import main

    first = api.cells(str(tmp_path / "runs/sweeps/fig10_k/results"))
    capsys.readouterr()
    assert main(["sweep", "fig10_k", "--storage", "runs/sweeps", "--tracking", "none", "--no-dashboard",
                 "--set", "train.max_steps=100", "--set", "eval.per_cell=5"]) == 0
    err = capsys.readouterr().err
    assert "resuming" in err and "evaluated 0 cells" in err, err[-2000:]
    again = api.cells(str(tmp_path / "runs/sweeps/fig10_k/results"))
    key = ["model_id", "i", "j", "region"]
    assert again.sort_values(key)[[*key, "n_correct"]].equals(first.sort_values(key)[[*key, "n_correct"]])
