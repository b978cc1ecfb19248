"""Every trained model under a results root, scored through Ray Data: what `abacus-ray eval-all`
runs (its --help says which models a results root holds), and `abacus_ray.api.evaluate_all`.

Everything is checked before Ray starts: the grids, the statuses to include, every target and
every checkpoint (loaded once, weights-only and hash-checked: `checked_models`), and the work
planned (which checks every cell against its model's Abacus table).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from abacus_ray import storage, trial_status
from abacus_ray.api.checks import check_cluster, check_num_cpus, join_cluster, leave_working_dir
from abacus_ray.config import EvalConfig
from abacus_ray.config.dicts import with_overrides
from abacus_ray.evaluation.grids import resolve_grid_names
from abacus_ray.evaluation.locate import eval_targets
from abacus_ray.evaluation.results import done_keys
from abacus_ray.sweep_dir import SweepDir
from abacus_ray.text import one_line

DEFAULT_GRIDS = ("paper-100plus",)
MAX_RECORD_BYTES = 16 << 20  # a trial record: about 100 bytes a trial, at most `sweep.MAX_TRIALS`


@dataclass(frozen=True)
class ScoredTarget:
    """One results directory's share of an `evaluate_all`: its models, the cells scored now and
    those already there, and the seconds it took."""

    out: str
    models: int
    cells: int
    skipped: int
    seconds: float


def find_models(root: storage.Location) -> list:
    """The latest checkpoint of `root` if it is a training run, else of each run directory directly
    in it (sorted). Not recursive: a link back up cannot loop. A checkpoint itself is refused: its
    results would go inside it."""
    from abacus_ray.model.checkpoint import META_FILE, latest_checkpoint  # heavy: torch

    if not storage.is_dir(root):
        return []
    if storage.is_file(root / META_FILE):
        raise ValueError(f"RESULTS: {root} is a checkpoint; give its run directory "
                         f"({root.parent}) or score it alone with `abacus-ray eval`")
    own = latest_checkpoint(root)
    if own is not None:
        return [own]
    found = [latest_checkpoint(c) for c in storage.listdir(root) if not c.name.startswith(".")]
    return [p for p in found if p is not None]


def sweep_models(root: storage.Location, include: frozenset[str]) -> list:
    """The checkpoints a sweep's trial record lists for the statuses in `include` (finished: what
    the sweep itself scored). A sweep without its record (its trials never all ended) is refused."""
    path = SweepDir.of(root).trials
    info = storage.file_info(path)
    if not storage.is_file(path):
        raise FileNotFoundError(f"{path}: no trial record: a sweep writes it when its trials "
                                "end; rerun the sweep's command to finish it, then eval-all")
    if info.size > MAX_RECORD_BYTES:
        raise ValueError(f"{path}: {info.size} bytes is too large for a trial record "
                         f"(at most {MAX_RECORD_BYTES})")
    try:
        record = storage.read_parquet(path)
    except (OSError, ValueError, pa.ArrowException) as e:
        raise ValueError(f"{path}: not a trial record ({one_line(str(e), 100)})") from None
    return [root / rel for rel in trial_status.checkpoints_to_score(record, include, str(path))]


def targets_of(results: storage.Location, given: str, out: str | None,
              include: str | None) -> list[tuple[list, storage.Location]]:
    """(models, where their results go) per target under `results` (`given`: as the user wrote it)
    that holds models; each results directory probed for writing, naming `--out` only when it was
    given."""
    statuses = trial_status.parse_include(include)
    targets = eval_targets(results)
    if out:
        out_loc = storage.resolve(out, flag="--out")  # probed below, as every target is
        targets = [dataclasses.replace(t, results=out_loc) for t in targets]
    found, sweeps = [], any(t.sweep for t in targets)
    for target in targets:
        try:
            models = (sweep_models(target.models, statuses) if target.sweep
                      else find_models(target.models))
        except (OSError, ValueError) as e:
            if len(targets) == 1:  # the one target asked for: its fault is the command's
                raise
            # one sweep of a storage root without (or with a damaged) trial record: the rest are
            # scored
            print(f"eval-all: skipped {target.models}: {one_line(str(e))}", file=sys.stderr)
            continue
        if models:
            found.append((models, target.results))
    if not found:
        hint = " (finished trials only; --include adds others)"
        hint = "" if include or not sweeps else hint
        raise ValueError(f"RESULTS: no checkpoints to score under {given}{hint}")
    flag = "--out" if out else "RESULTS"
    return [(models, storage.check_location(where, flag)) for models, where in found]


def checked_models(models: list, out: storage.Location) -> list:
    """Every checkpoint loaded once, weights-only and hash-checked (a foreign, truncated or
    wrong-architecture file is refused naming it, not inside an evaluator actor), and each model
    kept once by its `model_id`: copies of one run are scored once, under the first path."""
    from abacus_ray.model.checkpoint import load_checkpoint  # heavy: torch, not at --help

    by_id: dict[str, object] = {}
    for path in models:  # costs one load per model (seconds), small beside scoring it
        by_id.setdefault(load_checkpoint(path, map_location="cpu").model_id, path)
    if len(by_id) < len(models):
        print(f"eval-all: {len(models) - len(by_id)} checkpoint(s) for {out} are copies of "
              "another; each model is scored once", file=sys.stderr)
    return list(by_id.values())


def evaluate_all(results: str, *, grids: Sequence[str] | None = None, out: str | None = None,
                 include: str | None = None, per_cell: int | None = None, seed: int | None = None,
                 address: str | None = None, num_cpus: int | None = None) -> list[ScoredTarget]:
    """Score every model under `results` on `grids` (default: the paper's 100+ diagonal) into each
    sweep's own `results/` (or `out`), only the missing cells; `include`: a comma list of the
    other trial statuses whose last checkpoint is scored too."""
    from abacus_ray.evaluation.work import Source, work_items  # heavy: torch

    resolved = resolve_grid_names(tuple(grids or DEFAULT_GRIDS))
    trial_status.parse_include(include)  # a bad status in one line, before any results root is read
    eval_cfg = with_overrides(EvalConfig(), {k: v for k, v in (("per_cell", per_cell),
                                                               ("seed", seed)) if v is not None})
    check_num_cpus(num_cpus)
    check_cluster(address)  # an unreachable head or no token: one line, in seconds
    root = storage.probe(results, "RESULTS", write=False)  # a bad URI in one line, in seconds
    jobs = []
    for models, where in targets_of(root, results, out, include):
        # a local one by its real path (links followed), as its rows will name it
        models = [storage.on_disk(m.as_path().resolve()) if m.local else m for m in models]
        done_keys(where)  # a foreign or unreadable results directory: refused before Ray starts
        models = checked_models(models, where)
        jobs.append((len(models), where,
                     work_items([Source(str(m)) for m in models], resolved, eval_cfg, where)))
    return _on_ray(jobs, eval_cfg, root, address, num_cpus)


def _on_ray(jobs: list, eval_cfg: EvalConfig, root: storage.Location, address: str | None,
            num_cpus: int | None) -> list[ScoredTarget]:
    from abacus_ray.cluster import runtime  # heavy: Ray, only once everything is checked
    from abacus_ray.cluster.grid_eval import evaluate_on_ray
    from abacus_ray.cluster.shared_dir import check_every_node_sees

    # nothing below depends on the job's working directory
    leave_working_dir(storage.driver_dir(jobs[0][1], "."))
    join_cluster(address, num_cpus=num_cpus)
    runtime.quiet_data_progress()
    if root.local:  # evaluators on other nodes read the checkpoints: they must see this directory
        check_every_node_sees(root.as_path(), "RESULTS")
    scored = []
    for n_models, where, work in jobs:
        report = evaluate_on_ray(work, eval_cfg, where)
        scored.append(ScoredTarget(str(where), n_models, report.cells, report.skipped,
                                  report.seconds))
    return scored
