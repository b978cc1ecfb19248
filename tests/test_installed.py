"""abacus-ray works installed, not only from a checkout: its wheel, installed into a fresh virtual environment
and run from a directory outside the checkout, finds the figures by name, prices them, and builds a
dashboard from its packaged static files and paper values.

Nothing is downloaded: the wheel is built with this environment's setuptools (no build isolation), installed
without dependencies, and the new environment reaches the dependencies through a `.pth` file naming this
environment's site-packages directories (a plain path line: their own `.pth` files, an editable install of
the checkout among them, are not run)."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cost(35)  # seconds in `make test`: its place in the order (conftest)

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "abacus_ray", "dashboards")  # what the wheel is built from


def _run(argv: list, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh environment's bin directory, a working directory outside the checkout)."""
    tmp = tmp_path_factory.mktemp("installed")
    src = tmp / "src"  # a copy, so that building leaves no build/ or egg-info in the checkout
    src.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        kwargs = {"ignore": shutil.ignore_patterns("__pycache__")} if (REPO / name).is_dir() else {}
        copy(REPO / name, src / name, **kwargs)
    built = _run([sys.executable, "-m", "pip", "wheel", src, "--no-deps", "--no-build-isolation", "-q", "-w",
                  tmp / "wheel"], tmp)
    assert built.returncode == 0, built.stderr
    wheel = next((tmp / "wheel").glob("abacus_ray-*.whl"))
    env = tmp / "env"
    assert _run([sys.executable, "-m", "venv", "--without-pip", env], tmp).returncode == 0
    python = env / "bin" / "python"
    done = _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel], tmp)
    assert done.returncode == 0, done.stderr
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp).stdout.strip()
    deps = site.getsitepackages()  # plain paths: their .pth files (the checkout's editable finder) are not run
    (Path(purelib) / "abacus-ray-test-deps.pth").write_text("\n".join(deps) + "\n")
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    return env / "bin", elsewhere


@pytest.mark.slow  # builds a wheel, makes a virtual environment, plans every figure (about 30 s)
def test_the_installed_package_runs_a_figure_by_name_outside_the_checkout(installed):
    bin_dir, elsewhere = installed
    where = _run([bin_dir / "python", "-c", "import abacus_ray, dashboards; print(abacus_ray.__file__); "
                  "print(dashboards.__file__)"], elsewhere)
    assert where.returncode == 0 and all(not Path(p).is_relative_to(REPO) for p in where.stdout.split()), where

    dry = _run([bin_dir / "abacus-ray", "sweep", "fig10_k", "--dry-run", "--storage", elsewhere / "runs"], elsewhere)
    assert dry.returncode == 0, dry.stderr
    assert [t["name"] for t in json.loads(dry.stdout)["trials"]] == ["fig10_k/max_k=1", "fig10_k/max_k=12"]

    plan = _run([bin_dir / "abacus-ray", "plan", "fig10_k"], elsewhere)
    assert plan.returncode == 0, plan.stderr
    rows = plan.stdout.splitlines()
    assert rows[1].split()[:2] == ["fig10_k", "20"]  # the paper preset: 4 offsets x 5 seeds
    assert rows[-1].startswith("total: 20 trials")

    every = _run([bin_dir / "abacus-ray", "plan", "--all", "--preset", "paper", "--json"], elsewhere)
    assert every.returncode == 0, every.stderr
    summary = json.loads(every.stdout)
    assert {"fig3_embeddings", "fig10_k", "table2_sorting_arch"} <= {s["sweep"] for s in summary["sweeps"]}
    assert all(s["trials"] > 0 for s in summary["sweeps"]) and summary["total"]["a4000_hours"] > 0


@pytest.mark.slow  # the installed environment of the test above
def test_the_installed_package_builds_a_dashboard_from_its_packaged_files(installed):
    bin_dir, elsewhere = installed
    made = _run([bin_dir / "python", "-c", "from dashboards.sample import synthetic_results; synthetic_results("
                 "'runs/fig10_k/results', [('fig10_k/max_k=3_seed=0', ['model.max_k=3'])], [(1, 1), (2, 2)])"],
                elsewhere)
    assert made.returncode == 0, made.stderr
    site_dir = elsewhere / "site"
    built = _run([bin_dir / "abacus-ray", "dashboard", "runs/fig10_k", "--out", site_dir], elsewhere)
    assert built.returncode == 0, built.stderr
    assert {"dashboard.js", "dashboard.css", "paper.js"} <= {p.name for p in (site_dir / "assets").iterdir()}
    assert "arXiv 2405.17399" in (site_dir / "paper.html").read_text()  # from the packaged paper_values.json
