"""The cost of a reproduction before it runs: trials, A4000-hours, hours on named GPUs, grid
evaluation, storage and money, for one sweep or every figure and table (`abacus-ray plan`).

Training cost is counted in model FLOPs, as the budget is (`training/budget.py`,
docs/fidelity.md "The budget"): a trial's samples times its FLOPs per sample. Hours on a GPU are
those FLOPs over the card's dense bf16 peak (vendor data sheets, below) times a model-FLOP
utilisation (MFU): measured for the H100, stated for the others, `--mfu` overrides. Grid evaluation
is counted the way `benchmarks/eval_grid_time.py` counts it: teacher-forced tokens per cell
(`evaluation.work.cell_cost`) times forward FLOPs per token at the cell's line length, over the same
peak times the evaluation's utilisation (measured on the H100 at 0.65 of the training MFU, and taken
to keep that ratio elsewhere). Storage: the checkpoints each trial keeps and the Parquet rows its
evaluation writes. Pure Python, no Ray; the paper preset's whole reproduction plans in seconds.
How close this comes to the one measured GPU run: docs/performance.md, "Planning a reproduction".

On CPUs the same FLOPs are priced in core-hours, over one core's measured model FLOPs per second at
the model's width (`training/cpu_rates.py`, `benchmarks/cpu_throughput.py`): training at the
training loop's rate, evaluation at the engine's forward rate. Wall-hours on N cores pack the trials
onto the slots N cores hold (longest first) and add what a measured sweep on an embedded Ray adds
to that arithmetic (`CPU_SHARED_STRETCH`, `CPU_TRIAL_START_S`, `CPU_SWEEP_START_S`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from abacus_ray.config import ExperimentConfig
from abacus_ray.evaluation.grids import Cell, resolve_grid_names
from abacus_ray.evaluation.work import cell_cost, cells_for, token_flops
from abacus_ray.model.checkpoint import KEPT_CHECKPOINTS
from abacus_ray.model.memory import meta_model
from abacus_ray.training import cpu_rates
from abacus_ray.training.budget import A4000_UTILISATION, sample_flops, sample_limit
from abacus_ray.training.schedules import accumulation_steps, ramped_batch_size
from abacus_ray.training.throughput import PEAK_TFLOPS

# Training MFU of the paper's 8 x 2 on one H100 80GB HBM3, eager bf16: the 20-minute run's session
# average (docs/results.md §5; benchmarks/train_step.py measured 22.9-24.0
# % eager, 27.4 % compiled).
H100_MFU = 0.239
# Evaluation (teacher-forced forward, fp32 as the official code) on the same H100: 153 TFLOP/s of a
# 989 peak on a 2 % sample of `paper-addition` (docs/results/gpu/eval_time.txt): 0.155, i.e. 0.65 of
# the training MFU; other cards are taken to keep that ratio.
EVAL_PER_TRAIN_MFU = (153.0 / 989.0) / H100_MFU


@dataclass(frozen=True)
class Device:
    """A GPU model: its dense bf16 peak (`training/throughput.py`'s table) and
    the MFU assumed on it."""

    name: str
    peak_tflops: float
    mfu: float
    sheet: str  # where the peak comes from
    mfu_basis: str  # where the MFU comes from


def _peak(key: str) -> float:
    return dict(PEAK_TFLOPS)[key]


# Peaks are dense (no 2:4 sparsity); the data sheets print the sparse figure, twice these.
DEVICES = {d.name: d for d in (
    Device("H100", _peak("H100"), H100_MFU,
           "NVIDIA H100 Tensor Core GPU data sheet, SXM5: BF16 Tensor Core 1,979 "
           "TFLOPS with sparsity",
           "measured: the paper 8 x 2's 20-minute H100 run (docs/results.md §5)"),
    Device("A100", _peak("A100"), A4000_UTILISATION,
           "NVIDIA A100 Tensor Core GPU data sheet: BF16 Tensor Core 312 "
           "TFLOPS (624 with sparsity)",
           "stated: like the A4000, 2x the H100's memory bandwidth per peak "
           "FLOP (docs/fidelity.md)"),
    Device("A4000", _peak("RTX A4000"), A4000_UTILISATION,
           "NVIDIA RTX A4000 data sheet: Tensor performance 153.4 TFLOPS with sparsity",
           "stated: the budget's own pricing of one A4000-hour "
           "(training/budget.py, docs/fidelity.md)"),
    Device("L4", _peak("L4"), 0.20,
           "NVIDIA L4 Tensor Core GPU data sheet: BF16 Tensor Core 242 TFLOPS with sparsity",
           "stated: 0.7x the H100's memory bandwidth per peak FLOP (300 GB/s for 121 "
           "TFLOPS), so below it"),
)}

# one results row (a cell), measured: docs/results/gpu/results, 2,607 rows in 348,966 B
PARQUET_ROW_BYTES = 134
CHECKPOINT_BYTES_PER_PARAM = 12  # fp32 weights + AdamW's two fp32 moments (model.pt + state.pt)
MAX_SEEDS = 1000  # `--seeds` above this is refused before any expansion
MAX_CORES = 1_000_000  # `--cores` above this is refused (a cluster's CPUs, not a typo's)
# A CPU-scale sweep on an embedded Ray against the arithmetic, fitted to `make reproduce` on the
# 2-core VM (docs/performance.md, "Planning a reproduction"): trials training side by side each
# take this many times their core-hours (the cores' shared caches, validation, checkpoints, Ray's
# own processes); a lone trial takes its core-hours.
CPU_SHARED_STRETCH = 1.3
CPU_TRIAL_START_S = 7.0  # a trial's Tune and Train start-up
CPU_SWEEP_START_S = 25.0  # a sweep's own: Tune's start and end, the evaluation's actors, dashboards


@dataclass(frozen=True)
class TrialCost:
    """What one trial (one seed) costs, hardware-independent: FLOPs, tokens, bytes."""

    workers: int
    samples: int | None  # None: a wall-clock budget only
    train_flops: float | None
    wall_device_hours: float | None  # `train.budget_hours`: the cap on any device
    params: int
    eval_cells: int
    eval_tokens: float
    eval_flops: float
    hidden: int = 0  # the model's width: what a CPU core's rate is looked up by
    cores: float = 1.0  # CPUs the trial holds: workers x cluster.cpus_per_worker
    held: float = 1.0  # ... and its Tune driver's (`ClusterConfig.trial_cpus`): what packing counts

    @property
    def cpu_train_core_hours(self) -> float:
        """Core-hours of training on CPUs; a wall-clock budget (device-hours) caps them."""
        hours = None if self.train_flops is None else \
            self.train_flops / cpu_rates.train_rate(self.hidden) / 3600.0
        cap = None if self.wall_device_hours is None else \
            self.wall_device_hours * self.cores / self.workers
        caps = [h for h in (hours, cap) if h is not None]
        return min(caps) if caps else 0.0

    @property
    def cpu_eval_core_hours(self) -> float:
        return self.eval_flops / cpu_rates.eval_rate(self.hidden) / 3600.0

    @property
    def checkpoint_bytes(self) -> int:
        return self.params * CHECKPOINT_BYTES_PER_PARAM * KEPT_CHECKPOINTS

    @property
    def parquet_bytes(self) -> int:
        return self.eval_cells * PARQUET_ROW_BYTES

    @property
    def a4000_hours(self) -> float:
        return self.train_hours(DEVICES["A4000"])

    def train_hours(self, device: Device, mfu: float | None = None) -> float:
        """Device-hours (all workers together) of training on `device`; a
        wall-clock budget caps them."""
        hours = None if self.train_flops is None else \
            self.train_flops / (device.peak_tflops * 1e12 * (mfu or device.mfu)) / 3600.0
        caps = [h for h in (hours, self.wall_device_hours) if h is not None]
        return min(caps) if caps else 0.0

    def eval_hours(self, device: Device, mfu: float | None = None) -> float:
        return (
            self.eval_flops
            / (device.peak_tflops * 1e12 * (mfu or device.mfu) * EVAL_PER_TRAIN_MFU)
            / 3600.0
        )


EXACT_STEPS = 1 << 16  # a steps-only budget up to this many steps is summed step by step


def steps_samples(cfg: ExperimentConfig, workers: int) -> int:
    """Samples a steps-only budget consumes: the batch ramp stepped through, f = step / max_steps.

    Up to `EXACT_STEPS` steps, every step is counted; beyond, the samples per step (which only grow
    along the ramp) are averaged over `EXACT_STEPS` evenly spaced steps, so that a budget of 10^12
    steps plans in a second, off by less than one batch per `EXACT_STEPS` steps.
    """
    tc = cfg.train
    mbs_eff, n = tc.micro_batch * workers, tc.max_steps

    def per_step(step: int) -> int:
        batch = ramped_batch_size(step / n, tc.global_batch, mbs_eff, tc.batch_ramp)
        return accumulation_steps(batch, mbs_eff) * mbs_eff

    if n <= EXACT_STEPS:
        return sum(per_step(step) for step in range(n))
    return round(sum(per_step(i * n // EXACT_STEPS) for i in range(EXACT_STEPS)) * n / EXACT_STEPS)


def _model_shape(cfg: ExperimentConfig) -> tuple[float, int, object]:
    """(FLOPs per training sample, parameters, the meta-device model): shapes only."""
    model = meta_model(cfg)
    return sample_flops(cfg), model.num_params(), model


_CELLS: dict[tuple, tuple[Cell, ...]] = {}


def _cells(cfg: ExperimentConfig) -> tuple[Cell, ...]:
    """`cfg`'s evaluation cells, checked against its Abacus table once per (model, task, grids)."""
    key = (cfg.model, cfg.task, cfg.eval.grids)
    if key not in _CELLS:
        _CELLS[key] = tuple(cells_for(cfg, resolve_grid_names(cfg.eval.grids)))
    return _CELLS[key]


@functools.cache
def _token_sums(cells: tuple[Cell, ...], per_cell: int) -> tuple[float, float]:
    """(Teacher-forced tokens, tokens x line length) over `cells`: a forward's FLOPs per token are
    linear in the line length, so these two sums price any model on these cells."""
    tokens = [(cell_cost(c, per_cell), cell_cost(c, 1)) for c in cells]
    return sum(t for t, _ in tokens), sum(t * line for t, line in tokens)


def _eval_cost(
    cfg: ExperimentConfig, recurrences: tuple[int | None, ...]
) -> tuple[int, float, float]:
    """(cells, teacher-forced tokens, forward FLOPs) of scoring `cfg`'s model on its grids, once per
    test-time recurrence count (None: the model's own), as
    `benchmarks/eval_grid_time.py` counts them."""
    cells = _cells(cfg)
    tokens, tokens_x_line = _token_sums(cells, cfg.eval.per_cell)
    flops = 0.0
    for r in recurrences:
        at_zero, per_length = token_flops(cfg, r or cfg.model.test_recurrences)
        flops += at_zero * tokens + per_length * tokens_x_line
    return len(cells) * len(recurrences), tokens * len(recurrences), flops


def _shape_key(cfg: ExperimentConfig) -> ExperimentConfig:
    """The config with everything that does not change a trial's cost made equal (name, seed)."""
    return dataclasses.replace(cfg, name="plan", seed=0)


@functools.cache
def _trial_cost(cfg: ExperimentConfig, recurrences: tuple[int | None, ...]) -> TrialCost:
    workers = cfg.cluster.workers
    per_sample, params, _ = _model_shape(cfg)
    samples, flops = sample_limit(cfg)
    if samples is not None:
        flops = samples * per_sample
    elif cfg.train.max_steps is not None:
        samples = steps_samples(cfg, workers)
        flops = samples * per_sample
    cells, tokens, eval_flops = _eval_cost(cfg, recurrences)
    return TrialCost(workers, samples, flops, cfg.train.budget_hours, params, cells, tokens,
                     eval_flops, cfg.model.hidden, workers * cfg.cluster.cpus_per_worker,
                     cfg.cluster.trial_cpus())


def trial_cost(cfg: ExperimentConfig, eval_recurrences: Sequence[int] = ()) -> TrialCost:
    """One trial's cost (cached by everything but its name and seed)."""
    return _trial_cost(_shape_key(cfg), tuple(eval_recurrences) or (None,))


@dataclass(frozen=True)
class SweepPlan:
    """A sweep's trials: each distinct cost once, with how many trials (seeds) share it."""

    name: str
    preset: str
    costs: tuple[tuple[TrialCost, int], ...]
    cpu_scale: bool = False  # trains on CPUs: the tiny preset, or cluster.use_gpu=false

    @property
    def trials(self) -> int:
        return sum(n for _, n in self.costs)

    def total(self, attr: str, *args) -> float:
        return sum(
            n * (getattr(c, attr)(*args) if args else getattr(c, attr)) for c, n in self.costs
        )

    def cpu(self, cores: int) -> dict[str, float]:
        """Core-hours of training and evaluation on CPUs, and wall-hours on `cores` cores: the
        trials packed, longest first, onto the slots the cores hold (as many trials as fit at
        once), then the evaluation spread over the cores, and a sweep's own start."""
        train, evaluate = self.total("cpu_train_core_hours"), self.total("cpu_eval_core_hours")
        held = max((c.held for c, _ in self.costs), default=1.0)
        slots = max(1, min(self.trials, int((cores + 1e-9) // held)))
        stretch = CPU_SHARED_STRETCH if slots > 1 else 1.0
        runs = sorted((c.cpu_train_core_hours / c.workers * stretch + CPU_TRIAL_START_S / 3600
                       for c, n in self.costs for _ in range(n)), reverse=True)
        loads = [0.0] * slots
        for hours in runs:
            loads[loads.index(min(loads))] += hours
        wall = max(loads, default=0.0) + evaluate / cores + CPU_SWEEP_START_S / 3600
        return {"train_core_hours": train, "eval_core_hours": evaluate,
                "core_hours": train + evaluate, "wall_hours": wall if runs else 0.0}


# What a sweep writes beside its checkpoints and results: Tune's state, the MLflow store, the
# dashboard (a tiny sweep's are a few MB; this leaves room)
SWEEP_OVERHEAD_BYTES = 64 << 20


def sweep_bytes(configs: Sequence[ExperimentConfig], eval_recurrences: Sequence[int] = ()) -> int:
    """The bytes a sweep of `configs` writes under its storage: each trial's kept checkpoints and
    its results rows, plus `SWEEP_OVERHEAD_BYTES`."""
    costs = [trial_cost(c, eval_recurrences) for c in configs]
    return sum(c.checkpoint_bytes + c.parquet_bytes for c in costs) + SWEEP_OVERHEAD_BYTES


def cpu_plan(configs: Sequence[ExperimentConfig], cores: int) -> dict[str, float]:
    """One sweep's trials on `cores` CPU cores (`SweepPlan.cpu`)."""
    counts: dict[TrialCost, int] = {}
    for cfg in configs:
        cost = trial_cost(cfg)
        counts[cost] = counts.get(cost, 0) + 1
    return SweepPlan("", "", tuple(counts.items()), True).cpu(cores)


def cpu_price_words(configs: Sequence[ExperimentConfig], cores: int) -> str:
    """What a sweep's trials cost on `cores` CPU cores: "plan: X core-hours, Y wall-hours on N
    CPUs"."""
    return sweeps_price_words([configs], cores)


def sweeps_price_words(sweeps: Sequence[Sequence[ExperimentConfig]], cores: int) -> str:
    """The same for sweeps run one after another (each sweep's trials its own configs)."""
    plans = [cpu_plan(sweep, cores) for sweep in sweeps]
    core_hours, wall_hours = (sum(p[k] for p in plans) for k in ("core_hours", "wall_hours"))
    return f"plan: {core_hours:,.2f} core-hours, {wall_hours:,.2f} wall-hours on {cores} CPUs"


def resolve_devices(names: Iterable[str], flag: str = "--gpu") -> list[Device]:
    """The named GPUs (any case); an unknown name is refused naming `flag`, the
    option it was given to."""
    out = []
    for name in names:
        key = next((k for k in DEVICES if k.lower() == name.strip().lower()), None)
        if key is None:
            raise ValueError(f"{flag}: unknown GPU {name!r}; choose from {', '.join(DEVICES)}")
        out.append(DEVICES[key])
    return out


def parse_per_gpu(values: Sequence[str], flag: str, devices: Sequence[Device], *, low: float,
                  high: float) -> dict[str, float]:
    """`--mfu 0.3` (every GPU) or `--mfu H100=0.3` (one GPU), repeatable, checked
    to lie in [low, high]."""
    out: dict[str, float] = {}
    for text in values:
        name, sep, number = text.rpartition("=")
        try:
            value = float(number)
        except ValueError:
            raise ValueError(f"{flag}: {text!r} is not a number or GPU=number") from None
        if not low <= value <= high or value != value:
            raise ValueError(f"{flag}: {text!r} must lie in [{low:g}, {high:g}]")
        targets = resolve_devices([name], flag) if sep else devices
        if sep and targets[0] not in devices:
            raise ValueError(f"{flag}: {text!r} names {targets[0].name}, which is not planned "
                             f"(--gpu {', '.join(d.name for d in devices)})")
        out.update({d.name: value for d in targets})
    return out


def summarise(plans: Sequence[SweepPlan], devices: Sequence[Device], mfu: dict[str, float],
              price: dict[str, float], cores: int = 1) -> dict:
    """Per sweep and in total: trials, A4000-hours, training and evaluation hours per GPU, core- and
    wall-hours on `cores` CPU cores, bytes, money."""
    rows = []
    for p in plans:
        row = {
            "sweep": p.name,
            "preset": p.preset,
            "trials": p.trials,
            "a4000_hours": p.total("a4000_hours"),
            "samples": p.total("samples")
            if all(c.samples is not None for c, _ in p.costs)
            else None,
            "train_flops": p.total("train_flops")
            if all(c.train_flops is not None for c, _ in p.costs)
            else None,
            "eval_cells": p.total("eval_cells"),
            "eval_tokens": p.total("eval_tokens"),
            "checkpoint_bytes": p.total("checkpoint_bytes"),
            "parquet_bytes": p.total("parquet_bytes"),
            "gpus": {},
        }
        for d in devices:
            m = mfu.get(d.name)
            train_h, eval_h = p.total("train_hours", d, m), p.total("eval_hours", d, m)
            g = {"train_hours": train_h, "eval_minutes": eval_h * 60.0}
            if d.name in price:
                g["usd"] = (train_h + eval_h) * price[d.name]
            row["gpus"][d.name] = g
        row["cpu"] = p.cpu(cores)
        row["cpu_scale"] = p.cpu_scale
        rows.append(row)
    total = {
        "trials": sum(r["trials"] for r in rows),
        "a4000_hours": sum(r["a4000_hours"] for r in rows),
        "eval_cells": sum(r["eval_cells"] for r in rows),
        "checkpoint_bytes": sum(r["checkpoint_bytes"] for r in rows),
        "parquet_bytes": sum(r["parquet_bytes"] for r in rows),
        "gpus": {
            d.name: {
                k: sum(r["gpus"][d.name].get(k, 0.0) for r in rows)
                for k in ("train_hours", "eval_minutes", *(("usd",) if d.name in price else ()))
            }
            for d in devices
        },
        "cpu": {k: sum(r["cpu"][k] for r in rows) for k in rows[0]["cpu"]} if rows else {},
    }
    assumptions = {
        d.name: {
            "peak_tflops": d.peak_tflops,
            "train_mfu": mfu.get(d.name, d.mfu),
            "eval_mfu": mfu.get(d.name, d.mfu) * EVAL_PER_TRAIN_MFU,
            "sheet": d.sheet,
            "mfu_basis": "--mfu" if d.name in mfu else d.mfu_basis,
            **({"usd_per_hour": price[d.name]} if d.name in price else {}),
        }
        for d in devices
    }
    return {
        "sweeps": rows,
        "total": total,
        "assumptions": assumptions,
        "cpu_basis": {
            "cores": cores,
            "machine": cpu_rates.MACHINE,
            "rates": [dataclasses.asdict(r) for r in cpu_rates.RATES],
        },
        "storage_basis": {
            "checkpoint_bytes_per_param": CHECKPOINT_BYTES_PER_PARAM,
            "checkpoints_kept": KEPT_CHECKPOINTS,
            "parquet_row_bytes": PARQUET_ROW_BYTES,
        },
    }
