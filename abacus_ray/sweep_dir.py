"""A sweep's directory: the one place that names every file and folder a sweep keeps.

A sweep `NAME` run with `--storage S` keeps, under `S/NAME/` (a local directory or an object-store
URI):

    sweep.json        the sweep's spec: the expanded trials' resolved configs; a rerun must match it
    tune/             Tune's experiment state (what `Tuner.restore` reads)
    train/            one Ray Train run per trial, holding its checkpoints
    results/          the Parquet results dataset (`part-*.parquet`)
    search.parquet    a search's reports (a sweep with a search only)
    timeline.parquet  where and when each trial ran (older sweeps: `cluster.parquet`)
    trials.parquet    the trial record: each trial's status and last checkpoint

and on the driver's own disk (the same directory when `S` is local; `storage.driver_dir` otherwise)
the MLflow store (`mlflow.db`, its artifacts in `mlartifacts/`) and the dashboard site
(`dashboard/`). Readers, writers and the commands take these names from `SweepDir` alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from abacus_ray import storage
from abacus_ray.config.identity import Extension, recorded_names, sweep_change, sweep_extension
from abacus_ray.storage import Location


@dataclass(frozen=True)
class SweepDir:
    """The sweep `name`'s directory under `storage_root` (the probed `--storage`)."""

    storage_root: Location
    name: str

    SPEC: ClassVar[str] = "sweep.json"
    TUNE: ClassVar[str] = "tune"
    GENERATION: ClassVar[str] = "generation"  # sweep.json's count of growths that trained
    TRAIN: ClassVar[str] = "train"
    # a trial's Ray Train run (its checkpoints): named after the trial, so stable across restores;
    # sweeps started before that named it by Tune's trial id, and those keep their directories
    OLD_TRAIN_RUN: ClassVar[str] = "train-{trial_id}"
    RESULTS: ClassVar[str] = "results"
    SUPERSEDED: ClassVar[str] = "superseded"  # rows of models a growth trained further
    SEARCH: ClassVar[str] = "search.parquet"
    TIMELINE: ClassVar[str] = "timeline.parquet"
    OLD_TIMELINE: ClassVar[str] = "cluster.parquet"  # the timeline of older sweeps; still read
    TRIALS: ClassVar[str] = "trials.parquet"
    DASHBOARD: ClassVar[str] = "dashboard"
    TRACKING_STORE: ClassVar[str] = "mlflow.db"
    TRACKING_ARTIFACTS: ClassVar[str] = "mlartifacts"  # MLflow artifacts, beside the store

    @classmethod
    def of(cls, root: Location) -> SweepDir:
        """The sweep whose directory is `root` (whether or not it holds anything yet)."""
        return cls(root.parent, root.name)

    @classmethod
    def at(cls, loc: Location) -> SweepDir | None:
        """The sweep whose root `loc` is, recognised by what a sweep leaves first (`sweep.json`,
        `results/` or `train/`), else None."""
        names = (cls.SPEC, cls.RESULTS, cls.TRAIN)
        return cls.of(loc) if any(storage.exists(loc / n) for n in names) else None

    @classmethod
    def holding(cls, results: Location) -> SweepDir | None:
        """The sweep a results directory belongs to: its parent when it is named `results/`."""
        named = results.name == cls.RESULTS and results.parent.name
        return cls.of(results.parent) if named else None

    @property
    def root(self) -> Location:
        return self.storage_root / self.name

    @property
    def spec(self) -> Location:
        return self.root / self.SPEC

    @staticmethod
    def spec_of(preset_name: str, configs: Sequence[Any],
                  claim: dict[str, Any] | None = None) -> dict[str, Any]:
        """What `sweep.json` holds: the preset, every trial's resolved config and, for a sweep file
        that declares one, its claim (`evaluation.claims.claim_to_dict`), which `summary` and the
        dashboard judge as they judge a figure's."""
        spec = {"preset": preset_name, "trials": [cfg.to_dict() for cfg in configs]}
        return spec if claim is None else spec | {"claim": claim}

    def check_same(self, spec: dict[str, Any], *, write: bool = True) -> Extension:
        """Refuse a `--storage` whose `sweep.json` records another sweep (what counts:
        `config.identity`); returns how this run grows the recorded one (empty: the same sweep, or
        none recorded). `write`: record this run where none is, or where it grows the recorded
        one (atomic: a rename or one PUT); growth that trains starts the next generation of Tune
        runs (`tune_run`). The command line checks before Ray starts, the driver again once the
        cluster has decided what was left automatic."""
        if not storage.exists(self.spec):
            if write:
                storage.write_text(self.spec, json.dumps(spec, indent=2, sort_keys=True))
            return Extension()
        recorded = self.read_spec()
        change = sweep_change(recorded, spec)
        if change is not None:
            raise ValueError(f"--storage: {self.root} holds a different sweep: {change}; "
                             "to start this one, give another --storage (or delete that "
                             "directory)")
        grown = sweep_extension(recorded, spec)
        if grown and write:
            generation = self.generation(recorded) + (1 if grown.trains else 0)
            storage.write_text(self.spec, json.dumps(spec | {self.GENERATION: generation},
                                                     indent=2, sort_keys=True))
        return grown

    def recorded_names(self, spec: dict[str, Any]) -> dict[str, str]:
        """This run's trial name -> its recorded name, for the trials `sweep.json` holds under
        another name (`config.identity.recorded_names`); none where nothing is recorded."""
        return recorded_names(self.read_spec(), spec) if storage.exists(self.spec) else {}

    @classmethod
    def generation(cls, spec: dict[str, Any]) -> int:
        """How many times the recorded sweep grew by trials or steps: the Tune run it is on."""
        return int(spec.get(cls.GENERATION, 0))

    def tune_run(self, generation: int) -> Location:
        """The Tune experiment of one generation: `tune/` for the sweep as first run, `tune-N/`
        after its Nth growth (Tune cannot add trials to a run it restores, so a grown sweep
        starts a new one, in which the kept trials continue their own Train runs)."""
        return self.root / (self.TUNE if generation == 0 else f"{self.TUNE}-{generation}")

    def read_spec(self) -> dict[str, Any]:
        """`sweep.json` as `spec_of` wrote it: an object with a preset name and (where it has
        them) a list of trial configs (objects); anything else, or a file that is no JSON, is one
        ValueError naming it."""
        data = storage.read_json(self.spec)
        trials = data.get("trials", [])
        if not isinstance(data.get("preset"), str) or not isinstance(trials, list) or not all(
                isinstance(t, dict) for t in trials) or not isinstance(data.get("claim", {}), dict):
            raise ValueError(f"{self.spec}: not a sweep spec (expected a preset name, a list "
                             "of trial configs and, where it has one, a claim object)")
        return data

    @property
    def recorded(self) -> bool:
        """Whether a sweep ran here: its `sweep.json` is written before any trial starts."""
        return storage.is_file(self.spec)

    @property
    def tune(self) -> Location:
        return self.root / self.TUNE

    @property
    def train(self) -> Location:
        return self.root / self.TRAIN

    @staticmethod
    def train_run_name(run: str) -> str:
        """A trial's Train run directory name: its run name past the sweep's (`fig10_k/max_k=12` ->
        `max_k=12`), with any character a path should not hold as `_`."""
        tail = run.split("/", 1)[-1]
        return re.sub(r"[^A-Za-z0-9=._+,-]", "_", tail).strip(".") or "run"

    def train_run(self, run: str, trial_id: str | None = None) -> Location:
        """One trial's Ray Train run directory, holding its checkpoints: named after the trial, or
        the directory an older sweep gave it by its trial id, where that one exists."""
        if trial_id is not None:
            old = self.train / self.OLD_TRAIN_RUN.format(trial_id=trial_id)
            if storage.is_dir(old):
                return old
        return self.train / self.train_run_name(run)

    @property
    def results(self) -> Location:
        return self.root / self.RESULTS

    @property
    def superseded(self) -> Location:
        """Cell rows of models the sweep has since trained further (`retire_shorter`): kept, out
        of the results that verdicts read."""
        return self.root / self.SUPERSEDED

    @property
    def search(self) -> Location:
        return self.root / self.SEARCH

    @property
    def timeline(self) -> Location:
        """Where the timeline is written."""
        return self.root / self.TIMELINE

    def timeline_to_read(self) -> Location:
        """The timeline a reader opens: `timeline.parquet`, else an older sweep's `cluster.parquet`
        (the new name when neither is there)."""
        old = self.root / self.OLD_TIMELINE
        return old if not storage.is_file(self.timeline) and storage.is_file(old) else self.timeline

    @property
    def trials(self) -> Location:
        return self.root / self.TRIALS

    @property
    def local(self) -> Path:
        """This machine's directory for what cannot live in a bucket: on a local disk, the root."""
        return storage.driver_dir(self.storage_root, self.name)

    @property
    def tracking(self) -> Path:
        """The default MLflow store's directory (its SQLite file `mlflow.db` in it)."""
        return self.local

    @property
    def dashboard(self) -> Path:
        return self.local / self.DASHBOARD
