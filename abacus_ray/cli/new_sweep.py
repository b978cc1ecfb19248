"""`abacus-ray sweep --new PATH`: a commented sweep file of one's own, ready to run.

The template declares what a figure module declares (`abacus_ray/figures/`): a `SWEEP` built on a
preset's `base` overrides, its axes and seeds, its `tiny` scale (the settings that train on CPU
cores in minutes), and a `CLAIM` that the sweep's closing line, `summary` and the dashboard judge.
Its `__main__` block makes `python PATH` run it as `abacus-ray sweep PATH` does.
"""

from __future__ import annotations

import re
from pathlib import Path

from abacus_ray import storage

TEMPLATE = '''"""{name}: the Abacus offset k on 3-digit subtraction (a sweep of one's own).

Run it:  abacus-ray sweep {path}  (or  python {path}), on an embedded local Ray, or under
`ray job submit` on a cluster; `--dry-run` prints the trials; rerunning resumes.
"""

import sys

from abacus_ray.cli.sweep import main
from abacus_ray.evaluation.claims import MAX, MIN, Arm, Cells, Claim
from abacus_ray.sweep import CPU_SCALE, Scale, Sweep

SWEEP = Sweep(
    name="{name}",  # the directory under --storage, and the first part of every run's name
    caption=__doc__.splitlines()[0],
    # config overrides every trial shares, on top of the preset (`abacus-ray describe` lists keys)
    base={{"task.name": "sub", "task.train_max_len": 3, "model.positions": "abacus"}},
    axes={{"model.max_k": [4, 8]}},  # the cross product of these values is trained
    seeds=3,  # training seeds per point: verdicts then need the seed spread to separate too
    # evaluation grids: names or specs (`abacus-ray eval --help`), here the 12 x 12 square and
    # the diagonal to 20, for any + or - task
    grids=("cells:1-12x1-12", "diagonal:13-20"),
    # what `--preset tiny` changes: CPU_SCALE is 1,500 steps with no wall-clock cap and two
    # trials side by side on two cores, the settings every figure trains at on CPUs
    tiny=Scale(overrides={{**CPU_SCALE}}, seeds=1),
)

# What the sweep should show, judged by `abacus-ray summary` and the dashboard from the results:
# the largest k against the smallest, on the diagonal lengths between their trained positions'
# ends. Arms pick rows by column values (or MIN / MAX of one); a claim about out-of-distribution
# cells first checks that every arm learned its task (in-distribution exact match >= 90 %).
CLAIM = Claim(
    "{name}",
    "a larger offset k solves subtraction past a smaller k's trained positions",
    Cells("i = j", past_positions=True),
    pairs=((Arm("largest k", {{"model.max_k": MAX}}), Arm("smallest k", {{"model.max_k": MIN}})),),
)

if __name__ == "__main__":
    sys.exit(main(SWEEP))
'''


def write_template(given: str) -> Path:
    """Write the template to `given` (a new `.py` file on this machine, named after its sweep);
    refused in one line where a file is there or the name cannot name a sweep."""
    path = storage.local_path(given, "--new", "a sweep file")
    if path.suffix != ".py":
        path = path.with_suffix(".py")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", path.stem):
        raise ValueError(f"--new: {path.stem!r} cannot name a sweep (letters, digits and _, not "
                         "starting with a digit)")
    if path.exists() or path.is_symlink():
        raise ValueError(f"--new: {path} exists; choose another name")
    storage.check_local_dir(path.parent, "--new")
    storage.write_text(storage.on_disk(path), TEMPLATE.format(name=path.stem, path=given))
    return path
