"""A sweep from start to verdict: find it, expand its trials, check what a run needs before Ray
starts, then train, score and draw it on Ray, and say what it found.

`abacus-ray sweep NAME [flags]`, `python sweeps/NAME.py [flags]` and `abacus_ray.api.sweep(NAME,
...)` all come here: the command line turns its flags into `SweepOptions` and prints what
`SweepResult` holds. Every refusal is a `ValueError` (or an `OSError` naming its path) raised before
Ray is imported, naming the option as the command line spells it (`--storage: ...`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from abacus_ray import figures, plugins, storage
from abacus_ray.api.checks import check_cluster, check_num_cpus, join_cluster, leave_working_dir
from abacus_ray.config import preset
from abacus_ray.config.dicts import flatten, overrides_dict
from abacus_ray.evaluation.grids import Grid, eval_tasks_for, resolve_grid_names
from abacus_ray.sweep import Search, Sweep, Trial, best_point
from abacus_ray.sweep_dir import SweepDir
from abacus_ray.text import one_line, shorten

if TYPE_CHECKING:
    import pandas as pd

TRACKING = ("mlflow", "wandb", "none")


@dataclass(frozen=True)
class SweepOptions:
    """How one sweep runs: the command line's flags (`abacus-ray sweep NAME --help` says what each
    means) as one object. `overrides` and `axes` take values or their text (`{"train.lr": 3e-3}`
    or `{"train.lr": "3e-3"}`); `plugins` are modules or .py files imported before anything is
    built."""

    preset: str = "tiny"
    seeds: int | None = None
    storage: str = "results"
    address: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    plugins: tuple[str, ...] = ()
    axes: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    budget_hours: float | None = None
    per_cell: int | None = None
    grids: tuple[str, ...] | None = None
    max_trials: int | None = None
    samples: int | None = None
    grace_steps: int | None = None
    confirm: bool = False
    break_lease: bool = False
    evaluate: bool = True
    tracking: str = "mlflow"
    tracking_uri: str | None = None
    dashboard: bool = True
    num_cpus: int | None = None


@dataclass(frozen=True)
class SweepPlan:
    """A sweep checked and expanded, nothing started: what `--dry-run` prints and what `run` trains.
    `location` is the probed storage root; `notes` are lines worth telling before the run starts."""

    sweep: Sweep
    options: SweepOptions
    search: Search | None
    trials: tuple[Trial, ...]
    grids: Mapping[tuple[str, ...], list[Grid]]
    location: storage.Location
    claim: dict | None
    notes: tuple[str, ...] = ()

    @property
    def dirs(self) -> SweepDir:
        return SweepDir(self.location, self.sweep.name)


@dataclass(frozen=True)
class SweepResult:
    """What a sweep found: where it lives, every trial's status, the failures (trial name ->
    why), its `Conclusion:` line (None: no claim, or nothing scored) and its dashboard (None: not
    drawn)."""

    name: str
    root: str
    results: str
    statuses: Mapping[str, str]
    failures: Mapping[str, str]
    conclusion: str | None
    dashboard: str | None

    def cells(self) -> pd.DataFrame:
        """Every scored cell of the sweep, one row each (`docs/reference.md`, "Parquet")."""
        from abacus_ray.evaluation.results import read_cells

        return read_cells(storage.resolve(self.results))


# --- finding a sweep ------------------------------------------------------------------------------

def available() -> list[str]:
    """The sweep names `abacus-ray sweep NAME` takes: every figure, and the sweep files in
    ./sweeps."""
    own = Path.cwd() / "sweeps"
    files = ({p.stem for p in own.glob("*.py") if not p.name.startswith("_")}
             if own.is_dir() else set())
    return sorted(set(figures.names()) | files)


def _names_a_file(name: str) -> bool:
    return name.endswith(".py") or "/" in name or storage.is_uri(name)


def load_sweep(name: str) -> Sweep:
    """The sweep `name` names: a figure (`fig10_k`, from `abacus_ray.figures`), or a sweep file, a
    Python file declaring `SWEEP = Sweep(...)`: a path or file:// URI, or NAME.py in
    ./sweeps (the user's own)."""
    sweep = None if _names_a_file(name) else figures.figure(name)
    if sweep is not None:
        return sweep
    if _names_a_file(name) or Path(name).exists():
        path = storage.local_path(name, "NAME", "a sweep file")
    else:
        path = Path.cwd() / "sweeps" / f"{name}.py"
        if not path.is_file():
            raise ValueError(f"NAME: no sweep named {name!r}; choose one of "
                             f"{', '.join(available())} or give the path of a sweep file")
    if not path.is_file():
        raise storage.not_a_file(path, "no such sweep file", "a sweep file")
    storage.check_regular_file(storage.resolve(str(path)), storage.MAX_TEXT_BYTES)  # kilobytes
    if path.suffix != ".py":
        raise ValueError(f"NAME: {path} is not a sweep file (a Python file declaring SWEEP = "
                         "Sweep(...), e.g. sweeps/fig10_k.py)")
    module = _run_sweep_file(path)
    sweep = getattr(module, "SWEEP", None)
    if not isinstance(sweep, Sweep):
        raise ValueError(f"{path}: declares no SWEEP = Sweep(...)")
    _SWEEP_FILES.append(module)
    return sweep


_SWEEP_FILES: list[object] = []  # the sweep files this process ran, for their CLAIMs


def own_claim(sweep: Sweep) -> dict | None:
    """The claim a sweep file declares beside its SWEEP (`CLAIM = Claim(...)`), as `sweep.json`
    records it, for a sweep no figure claims; None where it declares none. The file is one this
    process ran (`load_sweep`) or the script itself (`python my_sweep.py`)."""
    from abacus_ray.evaluation.claim_record import claim_to_dict
    from abacus_ray.evaluation.claims import Claim

    if figures.claim(sweep.name) is not None:
        return None
    for module in (*_SWEEP_FILES, sys.modules.get("__main__")):
        if module is not None and getattr(module, "SWEEP", None) is sweep:
            claim = getattr(module, "CLAIM", None)
            if claim is None:
                return None
            if not isinstance(claim, Claim):
                raise ValueError(f"{sweep.name}: CLAIM is not a Claim(...) "
                                 "(abacus_ray.evaluation.claims)")
            return claim_to_dict(claim)
    return None


def _run_sweep_file(path: Path) -> object:
    """Run a sweep file (it is code, like a Makefile) for its module; one that does not run is one
    line naming the file (and the line of a syntax error), not a traceback."""
    spec = importlib.util.spec_from_file_location(f"abacus_ray_sweep_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise ValueError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # whatever a sweep file raises is the file's fault: one line
        raise ValueError(
            f"{path}: does not run: {type(e).__name__}: {one_line(str(e), 300)}") from None
    except SystemExit as e:  # sys.exit() while it was read: it declared no sweep, whatever code
        raise ValueError(f"{path}: exited (SystemExit({e.code!r})) while it was read, before it "
                         "declared its SWEEP; a sweep file runs its sweep only under "
                         "`if __name__ == \"__main__\":`") from None
    return module


# --- its trials -----------------------------------------------------------------------------------

def parse_axes(given: Sequence[str]) -> dict[str, list[str]]:
    """`--axis KEY=V1,V2` items as axes: each key once, known to the config, with at least one
    value. An axis the sweep has already takes these values instead of its own."""
    axes: dict[str, list[str]] = {}
    known = set(flatten(preset("tiny").to_dict()))
    for item in given:
        shown = f"--axis {shorten(item, 80)}"
        key, sep, values = (part.strip() for part in item.partition("="))
        if not sep or not key:
            raise ValueError(f"{shown}: expected KEY=V1,V2, e.g. model.max_k=4,8")
        if key not in known:
            raise ValueError(f"{shown}: {key!r} is not a config key (abacus-ray describe "
                             "lists them)")
        if key in axes:
            raise ValueError(f"{shown}: {key} is given twice; give one comma list")
        axes[key] = [v.strip() for v in values.split(",") if v.strip()]
        if not axes[key]:
            raise ValueError(f"{shown}: no value; give one value or a comma list")
    return axes


def search_of(sweep: Sweep, options: SweepOptions) -> Search | None:
    """The sweep's search under `samples` / `grace_steps` (None: a plain sweep)."""
    search = sweep.search_for(options.preset)
    if search is None:
        return None
    changed = {k: v for k, v in (("samples", options.samples), ("grace_steps", options.grace_steps))
               if v is not None}
    return dataclasses.replace(search, **changed)


def expand(sweep: Sweep, options: SweepOptions, search: Search | None = None) -> list[Trial]:
    """The sweep's trials under `options` (validated; no Ray): a search's picked points in order."""
    names = [plugins.load(given) for given in options.plugins]
    overrides: dict[str, Any] = {**({"plugins": ",".join(dict.fromkeys(names))} if names else {}),
                                 **options.overrides}
    if options.budget_hours is not None:
        overrides["train.budget_hours"] = options.budget_hours
    if options.per_cell is not None:
        overrides["eval.per_cell"] = options.per_cell
    trials = sweep.expand(options.preset, seeds=options.seeds, overrides=overrides,
                          axes={k: list(v) for k, v in options.axes.items()},
                          grids=tuple(options.grids) if options.grids else None)
    if not trials:
        raise ValueError(f"--preset: {options.preset} expands to no trials")
    if search is not None:
        trials = search.pick(trials)
    if options.max_trials is not None:
        if options.max_trials < 1:
            raise ValueError(f"--max-trials: must be >= 1, got {options.max_trials}")
        trials = trials[: options.max_trials]
    return trials


def confirmation(sweep: Sweep, preset_name: str, loc: storage.Location) -> Sweep:
    """`--confirm`: the search's best finished point (highest last validation score) under `loc`
    (the probed storage) as a plain sweep to retrain."""
    path = SweepDir(loc, sweep.name).search
    if not storage.is_file(path):
        raise FileNotFoundError(2, f"no finished search of {sweep.name} to confirm (run it first)",
                                str(path))
    return sweep.confirmation(preset_name, best_point(storage.read_parquet(path).to_pylist()))


# --- before Ray -----------------------------------------------------------------------------------

def check_before_ray(options: SweepOptions) -> storage.Location:
    """What a run checks before Ray starts, a dry run's included: CPUs, tracking, the cluster, and
    the storage probed (a small write, list and delete), so that a dry run passes only where the
    run could start."""
    check_num_cpus(options.num_cpus)
    if options.tracking not in TRACKING:
        raise ValueError(f"--tracking: {options.tracking!r} is not one of {', '.join(TRACKING)}")
    if options.tracking == "wandb" and importlib.util.find_spec("wandb") is None:
        raise ValueError("--tracking wandb: needs the wandb package (pip install wandb)")
    if options.tracking_uri is not None and (
        options.tracking != "mlflow" or "://" not in options.tracking_uri
    ):
        raise ValueError(f"--tracking-uri: {storage.safe_uri(options.tracking_uri)!r} is not an "
                         "MLflow server URI (http://HOST:PORT) or --tracking is not mlflow")
    check_cluster(options.address)
    return storage.probe(options.storage, "--storage")  # one line for bad storage


def prepare(sweep: Sweep | str, options: SweepOptions) -> SweepPlan:
    """`sweep` checked and expanded under `options`, nothing started; refused in one line (a
    `ValueError`) where it could not run, or where its directory holds another sweep."""
    sweep = load_sweep(sweep) if isinstance(sweep, str) else sweep
    loc = None
    if options.confirm:
        loc = check_before_ray(options)  # a bad URI in one line, before its search is read
        sweep = confirmation(sweep, options.preset, loc)
    search = search_of(sweep, options)
    trials = expand(sweep, options, search)
    grids = {t.config.eval.grids: resolve_grid_names(t.config.eval.grids) for t in trials}
    for task, names in {(t.config.task.name, t.config.eval.grids) for t in trials}:
        for grid in grids[names]:  # a grid of another task's problems: refused before any training
            eval_tasks_for(task, grid.task, grid_name=grid.name, trained="the sweep trains on",
                           instead="cells: / diagonal: specs")
    loc = loc or check_before_ray(options)
    # another sweep in this directory: refused before Ray starts (the driver checks again)
    dirs = SweepDir(loc, sweep.name)
    renamed = dirs.recorded_names(SweepDir.spec_of(options.preset, [t.config for t in trials]))
    trials = [dataclasses.replace(t, config=t.config.replace(name=renamed[t.name]))
              if t.name in renamed else t for t in trials]
    grown = dirs.check_same(SweepDir.spec_of(options.preset, [t.config for t in trials]),
                            write=False)
    notes: tuple[str, ...] = ()
    if grown:  # more trials, grids or steps: only what is missing runs
        notes += (f"{sweep.name}: grows the sweep in {dirs.root}: {grown.words()}",)
    if options.tracking == "mlflow" and not loc.local:
        store = options.tracking_uri or dirs.tracking / SweepDir.TRACKING_STORE
        notes += (f"{sweep.name}: MLflow store {store} (SQLite cannot live in a bucket: it stays "
                  "on this machine)",)
    return SweepPlan(sweep, options, search, tuple(trials), grids, loc, own_claim(sweep), notes)


def check_fits(plan: SweepPlan) -> None:
    """What only a real run checks: the embedded Ray's trials fit this machine's memory, and a
    local storage has the room the sweep will still write."""
    if plan.options.address is None and not os.environ.get("RAY_ADDRESS"):
        import torch  # heavy: only for a run that trains here

        from abacus_ray.training.loop import check_fits_here

        gpus = torch.cuda.device_count()  # what the embedded Ray finds, as the driver will decide
        check_fits_here([t.config.replace(cluster=t.config.cluster.resolved(gpus))
                         for t in plan.trials])
    check_free_space(plan)


def check_free_space(plan: SweepPlan) -> None:
    """Refuse a local storage whose disk has less room than the sweep will still write (what
    `abacus-ray plan` counts, less what its directory already holds): a disk that fills mid-sweep
    costs every trial its last checkpoint. An object store is not measured."""
    here = plan.dirs.root
    free = storage.free_bytes(here)
    if free is None:
        return
    from abacus_ray.plan import sweep_bytes

    need = sweep_bytes([t.config for t in plan.trials],
                       plan.sweep.eval_recurrences_for(plan.options.preset))
    need -= storage.tree_bytes(here)
    if free < need:
        raise ValueError(f"--storage: {plan.location}: {free / 1e6:,.0f} MB free, but this sweep "
                         f"will write about {need / 1e6:,.0f} MB more (its checkpoints and "
                         "results, as `abacus-ray plan` counts them); free some space or give "
                         "another --storage")


# --- on Ray ---------------------------------------------------------------------------------------

def run(plan: SweepPlan) -> SweepResult:
    """Train and score `plan`'s trials on Ray (one run at a time in its directory: a second is
    refused before Ray starts), draw its dashboard, and judge its claim."""
    check_fits(plan)
    with storage.lease(plan.dirs.root, "--storage", break_lease=plan.options.break_lease):
        return _on_ray(plan)


def _on_ray(plan: SweepPlan) -> SweepResult:
    # heavy: Ray, only once a sweep really runs
    from abacus_ray.api.verdicts import claim_for, sweep_conclusion
    from abacus_ray.cluster.driver import run_sweep
    from abacus_ray.plan import cpu_price_words

    o, dirs = plan.options, plan.dirs
    if o.address is not None:  # joined before the sweep's directory is made
        join_cluster(o.address)
    leave_working_dir(dirs.local)  # the sweep's directory, or this machine's for a bucket
    found = run_sweep(plan.sweep.name, o.preset, list(plan.trials), storage_root=plan.location,
                      grids=plan.grids, address=o.address, evaluate=o.evaluate,
                      num_cpus=o.num_cpus,
                      eval_recurrences=plan.sweep.eval_recurrences_for(o.preset),
                      tracking=o.tracking, search=plan.search, tracking_uri=o.tracking_uri,
                      price=cpu_price_words,  # trials on CPUs: their cost in the first line
                      claim=plan.claim)
    scored = storage.is_dir(dirs.results)
    site = None
    if o.dashboard and scored:
        from dashboards.build import build_site  # heavy: pandas and plotly, for a finished sweep

        site = str(build_site(dirs.results, dirs.dashboard, claim_for))
    conclusion = sweep_conclusion(dirs.results) if o.evaluate and scored else None
    return SweepResult(plan.sweep.name, str(dirs.root), str(dirs.results), dict(found.statuses),
                       dict(found.failures), conclusion, site)


def options_from(overrides: Sequence[str] | Mapping[str, Any] = (), **given: Any) -> SweepOptions:
    """`SweepOptions` from keyword arguments, `overrides` as a mapping or as `KEY=VALUE` texts."""
    for key in ("plugins", "grids"):
        if isinstance(given.get(key), list):
            given[key] = tuple(given[key])
    return SweepOptions(overrides=overrides_dict(overrides), **given)


def sweep(name: str | Sweep, overrides: Sequence[str] | Mapping[str, Any] = (),
          **options: Any) -> SweepResult:
    """Run a sweep (a figure's name, a sweep file's path, or a `Sweep`) under `SweepOptions`'
    keywords; a rerun with the same options resumes it. Returns what it found."""
    return run(prepare(name, options_from(overrides, **options)))
