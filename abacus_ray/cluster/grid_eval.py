"""Grid evaluation on Ray Data: (checkpoint x cell batches) -> evaluator actors -> Parquet parts.

The caller plans small work items first (`evaluation.work.work_items`: a checkpoint and a few
seconds' worth of cells, only the cells whose results key is missing), Ray Data hands them to actor
pools that pull items as they finish (fast actors take more), each actor keeps its last models
loaded, and the driver writes every returned block as an atomic Parquet part. On a cluster with
GPUs a GPU pool and a CPU pool run side by side; items are split between them by their forward
FLOPs and each pool's speed (`split_by_speed`), and each pool balances its own actors dynamically.
A GPU actor falls back to the CPU where CUDA is absent (a fake GPU slot in tests).
"""

from __future__ import annotations

import os
import socket
import sys
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import ray
import ray.data
import ray.exceptions
import torch
from ray.util.annotations import RayDeprecationWarning

from abacus_ray.cluster.placement import eval_pools
from abacus_ray.config import EvalConfig
from abacus_ray.evaluation.grids import Cell
from abacus_ray.evaluation.results import (
    KEY,
    KeyIndex,
    first_per_key,
    key_of,
    rows_table,
    write_part,
)
from abacus_ray.evaluation.runner import score_cells
from abacus_ray.evaluation.work import WorkItems
from abacus_ray.model.checkpoint import load_checkpoint, located
from abacus_ray.storage import Location

# `max_restarts` (below) has no named parameter in Ray 2.60's map_batches, only the deprecated
# remote-args route, whose warning is not about the user's run.
warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated",
                        category=RayDeprecationWarning)

# An evaluator actor's speed, for the split between the pools: forward FLOP/s, as measured
# (docs/performance.md, "The GPU path"), and a fixed cost per cell. GPU: an H100's on the paper's
# 8 x 2; a slower GPU then leaves the CPUs a little less than they could take, which costs little,
# where an underestimate hands CPU actors cells that run long after the GPUs are done. CPU: one
# core in fp32.
GPU_ACTOR_FLOPS, GPU_CELL_S = 150e12, 0.005
CPU_ACTOR_FLOPS, CPU_CELL_S = 40e9, 0.001
# A CPU actor takes an item only if it would end within half the GPU pool's time: a GPU pool that
# ends late costs little.
CPU_MARGIN = 2.0
ATTEMPTS = 5  # Ray Data runs of one evaluation: the first, then after lost nodes
RETRY_WAIT_S = 5.0  # before a rerun: the GCS needs seconds to mark a killed node dead, and a pool
# sized while it still counts that node places an actor there that dies at once


@dataclass
class GridEvalReport:
    items: int = 0
    cells: int = 0
    skipped: int = 0
    parts: list[str] = field(default_factory=list)
    workers: dict[str, int] = field(default_factory=dict)  # "pool:host:node:pid" -> cells scored
    seconds: float = 0.0


class CellEvaluator:
    """A Ray Data actor: scores work items, keeping its most recent models loaded."""

    KEEP_MODELS = 2

    def __init__(self, pool: str, eval_cfg: EvalConfig):
        self.pool = pool
        self.device = torch.device("cuda" if pool == "gpu" and torch.cuda.is_available() else "cpu")
        self.eval_cfg = eval_cfg
        self.models: OrderedDict[str, Any] = OrderedDict()
        # RAY: which node (one host can hold several); outside Ray (a direct call) there is none
        node = ray.get_runtime_context().get_node_id()[:8] if ray.is_initialized() else "-"
        self.worker = f"{pool}:{socket.gethostname()}:{node}:{os.getpid()}"

    def _load(self, path: str):
        if path in self.models:
            self.models.move_to_end(path)
        else:
            self.models[path] = load_checkpoint(located(path), map_location=self.device)
            while len(self.models) > self.KEEP_MODELS:
                self.models.popitem(last=False)
        return self.models[path]

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows: list[dict[str, Any]] = []
        for item in batch.to_pylist():
            ckpt = self._load(item["checkpoint"])
            cells = [Cell(*c) for c in zip(item["task"], item["i"], item["j"], strict=True)]
            out, _ = score_cells(ckpt, cells, self.eval_cfg, run_id=item["run_id"] or None,
                                 trial_id=item["trial_id"] or None)
            rows.extend(r | {"worker": self.worker} for r in out)
        return rows_table(rows)


def _datasets(items: list[dict[str, Any]], eval_cfg: EvalConfig, cpu_actors: int | None,
              gpu_actors: int | None):
    """The items as one Ray Data pipeline: a GPU and a CPU actor pool sized to the live nodes."""
    n_gpu, n_cpu = eval_pools(len(items), cpu_actors, gpu_actors)
    gpu_items, cpu_items = split_by_speed(items, n_gpu, n_cpu)
    # An actor is not restarted (max_restarts=0): on a lost node it could only wait for resources
    # that are gone. Its items fail instead; `evaluate_on_ray` reruns the missing cells elsewhere.
    outputs = []
    if gpu_items:  # RAY: GPU pool
        gpu_data = ray.data.from_items(gpu_items, override_num_blocks=len(gpu_items))
        outputs.append(gpu_data.map_batches(
            CellEvaluator, fn_constructor_args=("gpu", eval_cfg), batch_size=1,
            batch_format="pyarrow", num_gpus=1, num_cpus=0, max_restarts=0,
            compute=ray.data.ActorPoolStrategy(size=min(n_gpu, len(gpu_items)))))
    if cpu_items:  # RAY: CPU pool
        cpu_data = ray.data.from_items(cpu_items, override_num_blocks=len(cpu_items))
        outputs.append(cpu_data.map_batches(
            CellEvaluator, fn_constructor_args=("cpu", eval_cfg), batch_size=1,
            batch_format="pyarrow", num_cpus=1, max_restarts=0,
            compute=ray.data.ActorPoolStrategy(size=min(max(n_cpu, 1), len(cpu_items)))))
    return outputs[0] if len(outputs) == 1 else outputs[0].union(*outputs[1:])


def split_by_speed(items: list[dict[str, Any]], n_gpu: int,
                   n_cpu: int) -> tuple[list[dict], list[dict]]:
    """(GPU pool's items, CPU pool's items): largest first, each to the GPU pool unless the CPU pool
    would end in half the GPU pool's time with it (its work over its actors, or that one item if
    longer).

    The split is static because the pools are separate Ray Data operators. It must know the model:
    the speed ratio of a GPU to a CPU core grows with the model's size, so a fixed ratio hands the
    CPU actors cells of a large model that run long after the GPU is done (docs/performance.md,
    "The GPU path").
    """
    if not n_gpu or not n_cpu:
        return (items, []) if n_gpu else ([], items)
    gpu: list[dict] = []
    cpu: list[dict] = []
    gpu_work = cpu_work = cpu_longest = 0.0
    for item in sorted(items, key=lambda it: it["flops"], reverse=True):
        on_gpu = len(item["i"]) * GPU_CELL_S + item["flops"] / GPU_ACTOR_FLOPS
        on_cpu = len(item["i"]) * CPU_CELL_S + item["flops"] / CPU_ACTOR_FLOPS
        cpu_end = max((cpu_work + on_cpu) / n_cpu, cpu_longest, on_cpu)
        if CPU_MARGIN * cpu_end < (gpu_work + on_gpu) / n_gpu:
            cpu.append(item)
            cpu_work, cpu_longest = cpu_work + on_cpu, max(cpu_longest, on_cpu)
        else:
            gpu.append(item)
            gpu_work += on_gpu
    return gpu, cpu


def _left(items: list[dict[str, Any]], done: set[tuple]) -> list[dict[str, Any]]:
    """The items with their scored cells removed (items left empty are dropped)."""
    out = []
    for item in items:
        keep = [t for t, cell in enumerate(zip(item["task"], item["i"], item["j"], strict=True))
                if (item["checkpoint"], *cell) not in done]
        if keep:
            out.append(item | {name: [item[name][t] for t in keep] for name in ("task", "i", "j")})
    return out


def _fresh(block: pa.Table, index: KeyIndex) -> pa.Table:
    """The block's rows whose key no other writer has written since the plan was made."""
    have = index.refresh()
    block = first_per_key(block)
    keep = [n for n, r in enumerate(block.select(list(KEY)).to_pylist()) if key_of(r) not in have]
    return block if len(keep) == block.num_rows else block.take(pa.array(keep, pa.int64()))


def evaluate_on_ray(work: WorkItems, eval_cfg: EvalConfig, out_dir: Location, *,
                    cpu_actors: int | None = None, gpu_actors: int | None = None,
                    progress: bool = True) -> GridEvalReport:
    """Score the planned work items (`evaluation.work.work_items`, made before Ray starts, so bad
    input costs no cluster time) into `out_dir` (Parquet parts; a place the command line resolved).

    Fault tolerant: if a node is lost mid-run (its actors die, their items fail), the items' cells
    not yet written are run again on the nodes that are left, up to `ATTEMPTS` times; every cell is
    written exactly once.
    """
    index = KeyIndex(out_dir)  # the driver writes every part, one per returned block
    t0 = time.monotonic()
    items, n_cells, skipped = work.items, work.cells, work.skipped
    report = GridEvalReport(items=len(items), cells=n_cells, skipped=skipped)
    if not items:
        report.seconds = time.monotonic() - t0
        if progress:
            print(f"grid eval: nothing to do ({skipped} cells already present)", file=sys.stderr)
        return report
    done_cells: set[tuple] = set()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            ds = _datasets(items, eval_cfg, cpu_actors, gpu_actors)
            # RAY: stream results back
            for block in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
                if block.num_rows == 0:
                    continue
                new = _fresh(block, index)
                if new.num_rows:
                    part = write_part(index.loc, new)
                    report.parts.append(str(part))
                    index.wrote(part, (key_of(r) for r in new.select(list(KEY)).to_pylist()))
                cols = [block.column(c).to_pylist() for c in ("checkpoint", "task", "i", "j")]
                done_cells.update(zip(*cols, strict=True))
                for w in block.column("worker").to_pylist():
                    report.workers[w] = report.workers.get(w, 0) + 1
                if progress:
                    el, done = time.monotonic() - t0, len(done_cells)
                    eta = el / done * (n_cells - done) if done else float("nan")
                    line = f"grid eval: {done}/{n_cells} cells, {el:.0f}s elapsed, ETA {eta:.0f}s"
                    # redrawn in place on a terminal; a line each in a log file
                    if sys.stderr.isatty():
                        print("\r" + line, end="", file=sys.stderr, flush=True)
                    else:
                        print(line, file=sys.stderr, flush=True)
            break
        # RAY: an actor or node lost
        except (ray.exceptions.RayError, ray.exceptions.RaySystemError) as e:
            items = _left(items, done_cells)
            if attempt == ATTEMPTS or not items:
                raise
            missing = sum(len(t["i"]) for t in items)
            print(f"\ngrid eval: {type(e).__name__} (a node or actor lost?); running the {missing} "
                  f"missing cells again on the nodes left (attempt {attempt + 1} of {ATTEMPTS})",
                  file=sys.stderr)
            time.sleep(RETRY_WAIT_S * attempt)
    if progress and sys.stderr.isatty():
        print(file=sys.stderr)
    report.seconds = time.monotonic() - t0
    return report
