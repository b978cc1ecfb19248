"""`train`: the budgeted, resumable, data-parallel training loop (docs/official-code.md §4.13, §6).

One optimiser step = `accumulation_steps(batch, micro_batch x world)` micro-batches, each a forward
and backward of the progressive loss divided by the accumulation count; then unscale, clip to 0.5
over all parameters, AdamW. Before each step the lr is set from the trapezoid at the current budget
fraction f; after it, the batch size is recomputed from the ramp. Training stops at a step boundary
once f >= 1 (the official code checks after every micro-batch; stopping mid-accumulation would
waste it).

Determinism: the data of micro-batch i is `TrainStream.batch(i, ...)` and its progressive-loss depth
and Abacus offset come from a generator seeded by (seed, i, rank; `train.worker_draws`,
progressive.py); the initial-state noise comes from the
global torch RNG, seeded per rank and saved in checkpoints. With a steps budget a run is therefore
a pure function of its config, and N steps straight equal N/2 + resume + N/2 bit for bit on CPU.

Reports: `report(dict)` is called every `report_every_s` seconds of agreed wall time, whenever a
checkpoint is written (the dict then carries `checkpoint` and `model_id` on rank 0) and once at the
end (`final: True`). Under DDP every rank calls it at the same steps (Ray Train wants all workers to
report); only rank 0 writes checkpoints.

Divergence: a step whose loss or gradient norm (both agreed over ranks, in the all-reduce above) is
not finite stops the run before the optimiser touches the weights: nothing is saved, the final
report carries `diverged_at_step` (that step) and no checkpoint, and the run's last checkpoint is
the last finite one. Under fp16 the grad scaler skips such steps instead, so fp16 runs are not
stopped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from abacus_ray import storage
from abacus_ray.config import ExperimentConfig
from abacus_ray.config.train import resolved_compile
from abacus_ray.model import checkpoint as ckpt
from abacus_ray.model.memory import check_training_fits
from abacus_ray.model.positions import OffsetDraw
from abacus_ray.model.precision import resolve_precision
from abacus_ray.model.transformer import ArithmeticTransformer
from abacus_ray.seeds import (
    every_rank_rng_state,
    micro_batch_generator,
    rank_seed,
    resumed_rank_seed,
    seed_all,
    set_rng_state,
    weights_seed,
)
from abacus_ray.storage import Location
from abacus_ray.tasks.stream import TrainStream, padded_length
from abacus_ray.training.budget import Budget
from abacus_ray.training.cadence import Cadence
from abacus_ray.training.master import working_model
from abacus_ray.training.objective import answer_loss, loss_denominator
from abacus_ray.training.optimizer import build_optimizer, set_lr
from abacus_ray.training.padding import Padding
from abacus_ray.training.parallel import DataParallel, unwrapped
from abacus_ray.training.progressive import (
    backprop_limit,
    expected_depths,
    plan_calls,
    throttle_factor,
)
from abacus_ray.training.schedules import accumulation_steps, lr_multiplier, ramped_batch_size
from abacus_ray.training.throughput import Window, eta_seconds, peak_flops


@dataclass
class TrainResult:
    checkpoint: str | None  # final checkpoint directory (None without a checkpoint_dir)
    model_id: str  # sha256 of the final weights
    metrics: dict  # the final report
    # mean loss of every optimiser step of this session
    losses: list[float] = field(default_factory=list)
    model: nn.Module | None = None  # the trained model (unwrapped, eval mode)


def check_resumable(cfg: ExperimentConfig, saved: ExperimentConfig, path: str,
                    flag: str = "resume_from") -> None:
    """The model, task and seed must match the checkpoint; training settings may change
    (e.g. a longer budget)."""
    for section in ("seed", "task", "model"):
        if getattr(cfg, section) != getattr(saved, section):
            mine, theirs = cfg.to_dict()[section], saved.to_dict()[section]
            if isinstance(mine, dict):
                diff = [k for k in mine if mine[k] != theirs.get(k)]
                section = f"{section}.{diff[0]}" if diff else section
            raise ValueError(f"{flag}: {path} was trained with a different {section}; a resumed "
                             "run keeps its model, task and seed")


def check_fits(cfg: ExperimentConfig, device: str | torch.device) -> None:
    """Refuse a model or a micro-batch that cannot fit `device` (model/memory.py),
    before anything is built."""
    grad = backprop_limit(cfg.model.recurrences, cfg.train.max_backprop)
    check_training_fits(cfg, device, grad, padded_length(cfg.task))


def check_fits_here(configs: list[ExperimentConfig]) -> None:
    """`check_fits` for runs that will train on this machine, each model and batch once: on its GPU
    where a run asks for one and the machine has one, else on its CPU."""
    for cfg in dict.fromkeys(c.replace(name="", seed=0, eval=type(c.eval)()) for c in configs):
        check_fits(cfg, "cuda" if cfg.cluster.use_gpu and torch.cuda.is_available() else "cpu")


def _resolve_device(device: str | torch.device) -> torch.device:
    """A concrete device: CUDA gets its index (DDP wants one) and TF32 for the
    fp32 matmuls that remain."""
    device = torch.device(device)
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        # TF32 where fp32 matmuls remain (docs/official-code.md §6.6)
        torch.set_float32_matmul_precision("high")
    return device


def _build_model(
    cfg: ExperimentConfig, resume_from: Location | None
) -> tuple[nn.Module, dict | None]:
    """The initial model (same weights on every rank), with the checkpoint's weights
    and state when resuming."""
    seed_all(weights_seed(cfg.seed))  # identical initial weights on every rank
    model = ArithmeticTransformer.for_experiment(cfg)
    if resume_from is None:
        return model, None
    # a local directory (a URI's checkpoint is copied here first)
    path = ckpt.fetch(resume_from)
    check_resumable(cfg, ckpt.read_checkpoint_config(storage.on_disk(path)), str(path))
    # the checks of every loader: fit, finite, hash
    checked = ckpt.read_checked(storage.on_disk(path))
    ckpt.load_state(model, checked.weights, path / ckpt.MODEL_FILE)
    state_file = path / ckpt.STATE_FILE
    return model, ckpt.check_train_state(ckpt.load_weights_file(state_file), state_file)


class _Session:
    """One training session, read top to bottom in `run` and `step`.

    What varies between runs is chosen once here, each behind a small object: how the run spreads
    over ranks (`DataParallel`), which weights run forward and backward (`working_model`: the fp32
    model itself, or bf16-pure's working copy of it), the batches' width (`Padding`: eager, or a
    compiled block's fixed length) and when to checkpoint, validate and report (`Cadence`). Built
    in the order the RNG streams expect (initial weights, then the resumed or per-rank seed).
    """

    def __init__(
        self,
        cfg: ExperimentConfig,
        device: torch.device,
        process_group: Any,
        report: Callable[[dict], None] | None,
        root: Path | None,
        resume_from: Location | None,
        validation: Callable[[nn.Module], dict[str, float]] | None,
    ) -> None:
        self.cfg, self.tc, self.device = cfg, cfg.train, device
        self.report, self.root, self.validation = report, root, validation
        self.parallel = DataParallel(process_group, device)
        self.rank, self.world = self.parallel.rank, self.parallel.world
        # the model, its optimiser and precision
        self.model, saved_state = _build_model(cfg, resume_from)
        self.model.to(device).train()
        self.optimizer = build_optimizer(self.model, self.tc, device)
        self.precision = resolve_precision(self.tc.precision, device)
        self.scaler = self.precision.grad_scaler()
        # `model` holds the fp32 parameters the optimiser steps; `weights.working` runs forward and
        # backward (bf16-pure: a bf16 copy; else the model itself)
        self.weights = working_model(self.model, self.precision.name)
        # the budget and where a resumed run left off
        self.budget = Budget.from_config(cfg, self.world)
        self.micro_index, self.tokens_total = self._restore(saved_state)
        self.forward, self.padding = self._wrap()
        # the data and the objective
        self.stream = TrainStream(cfg.task, cfg.seed)
        self.line_length = padded_length(cfg.task)  # loss_reduction=none divides by it
        self.mbs, self.mbs_eff = self.tc.micro_batch, self.tc.micro_batch * self.world
        self.recurrences = cfg.model.recurrences
        self.limit = backprop_limit(self.recurrences, self.tc.max_backprop)
        self.throttle = throttle_factor(self.recurrences, self.limit) if self.tc.throttle else 1.0
        self.offsets = OffsetDraw.of(cfg)
        self.draw_rank = self.rank if self.tc.worker_draws == "per_worker" else 0  # progressive.py
        self.depth_total, self.depth_grad = expected_depths(
            self.recurrences, self.limit, self.tc.alpha
        )
        # what the session reports
        self.peak = peak_flops(device)
        self.losses: list[float] = []
        self.validated: dict[str, float] = {}
        self.diverged_at: int | None = None  # the step whose loss or gradient norm was not finite
        self.batch_size = self.tc.global_batch  # set from the ramp once the budget has started
        self.fraction_start = 0.0
        self.since_report = self.since_start = Window(start_s=0.0)  # rates for reports
        self.cadence = Cadence.starting(0.0, 0.0, 0.0, None)

    def _restore(self, saved_state: dict | None) -> tuple[int, int]:
        """Load the optimiser, scaler, budget and RNG state of a resumed run (or seed a fresh one).

        Returns the micro-batch index and the token count to continue from."""
        if saved_state is None:
            seed_all(rank_seed(self.cfg.seed, self.rank))
            return 0, 0
        self.optimizer.load_state_dict(saved_state["optimizer"])
        if saved_state.get("scaler"):
            self.scaler.load_state_dict(saved_state["scaler"])
        self.budget.restore(saved_state)
        rngs = saved_state.get("rng") or []
        if self.rank < len(rngs) and (self.rank == 0 or len(rngs) == self.world):
            set_rng_state(rngs[self.rank])
        else:  # saved by another world size (or rank 0's alone): restart from (seed, rank, step)
            seed_all(resumed_rank_seed(self.cfg.seed, self.rank, self.budget.step))
        return int(saved_state["micro_index"]), int(saved_state["tokens"])

    def _wrap(self) -> tuple[nn.Module, Padding]:
        """The module that runs forward and backward (the working weights, in DDP where DDP wraps
        them), and the batches' width: a compiled block's fixed length (`compile_block`), else
        each batch's own."""
        module = self.weights.working
        unused = self.cfg.model.injection == "none" and self.cfg.model.recurrences > 1
        forward = self.parallel.wrap(module, ddp_wraps=self.weights.ddp_wraps, find_unused=unused)
        randomised_fire = bool(self.cfg.model.fire_max_length)
        if resolved_compile(self.tc.compile, self.device.type, randomised_fire):
            module.compile_block()
            return forward, Padding(padded_length(self.cfg.task))
        return forward, Padding(None)

    # --- the session ---------------------------------------------------------------------------

    def run(self) -> TrainResult:
        """Take optimiser steps until the budget is spent; save and report at the end."""
        self.start()
        lr = 0.0
        while (fraction := self.budget.fraction()) < 1.0 and self.diverged_at is None:
            lr = self.step(fraction)
        fraction = self.budget.fraction()
        final_saved = None
        if self.diverged_at is None:
            if self.validation is not None and self.budget.step % self.cfg.eval.validation_every:
                self.run_validation()
            # periodic saves stop short of f = 1
            final_saved = self.save(fraction, self.losses[-1] if self.losses else math.nan)
        metrics = self.emit(self.since_start, fraction, lr, final=True, saved=final_saved)
        self.model.drop_compiled_block()  # the trained model is handed on eager
        self.model.eval()
        model_id = final_saved[1] if final_saved else ckpt.model_id_of(self.model)
        return TrainResult(
            final_saved[0] if final_saved else None, model_id, metrics, self.losses, self.model
        )

    def start(self) -> None:
        """Start the budget's clock, validate the starting weights, agree on the clock, and set the
        batch size, the report windows and the cadence from where the budget stands."""
        budget, tc = self.budget, self.tc
        budget.start()
        if self.validation is not None:
            self.run_validation()
        self.sync()
        self.fraction_start = budget.fraction()
        self.batch_size = ramped_batch_size(
            self.fraction_start, tc.global_batch, self.mbs_eff, tc.batch_ramp
        )
        now = budget.session_elapsed_s()
        self.since_report = Window(start_s=now)
        self.since_start = Window(start_s=now)  # the final report's rates cover the whole session
        self.cadence = Cadence.starting(
            now, tc.checkpoint_every_min * 60, tc.report_every_s,
            self.cfg.eval.validation_every if self.validation is not None else None)

    def step(self, fraction: float) -> float:
        """One optimiser step at budget fraction `fraction`, then the checkpoint, validation and
        report it calls for. Returns the step's learning rate."""
        tc = self.tc
        # 1. the learning rate from the trapezoid at f, the micro-batches from the batch ramp
        lr = tc.lr * lr_multiplier(fraction, tc.warmup, tc.cooldown,
                                   first_call=self.budget.step == 0)
        set_lr(self.optimizer, lr)
        accum = accumulation_steps(self.batch_size, self.mbs_eff)
        # 2. forward and backward of every micro-batch into the gradients
        loss_sum, tokens, positions, seq_sum = self.accumulate(accum)
        # 3. gradients no DDP averaged (bf16-pure over ranks), unscaled (fp16) and clipped
        self.parallel.finish_gradients(self.model)
        grad_norm = self.unscale_and_clip()
        # 4. every rank agrees on the clock, the step's loss, tokens and gradient norm
        step_loss, tokens_all, grad_norm = self.sync(float(loss_sum) / accum, tokens, grad_norm)
        # 5. a non-finite loss or norm stops the run before the optimiser touches the weights
        if not (math.isfinite(step_loss) and math.isfinite(grad_norm)) \
                and not self.scaler.is_enabled():
            self.diverged_at = self.budget.step + 1
            self.optimizer.zero_grad(set_to_none=True)
            return lr
        # 6. the optimiser step (through fp16's scaler), then the working weights follow it
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.weights.publish()
        # 7. count the step; checkpoint, validate and report as the cadence says
        self.count_step(accum, step_loss, int(tokens_all), positions, seq_sum)
        self.checkpoint_validate_report(step_loss, lr)
        return lr

    def accumulate(self, accum: int) -> tuple[torch.Tensor, int, int, int]:
        """Forward and backward `accum` micro-batches into the gradients (DDP syncs on the last
        call only). Returns the summed weighted loss, the tokens, the padded positions and the
        summed lengths."""
        loss_sum = torch.zeros((), device=self.device)
        tokens = positions = seq_sum = 0
        for a in range(accum):
            losses, ids, n_tokens = self.micro_batch(last_micro=a == accum - 1, accum=accum)
            for loss in losses:
                loss_sum += loss
            tokens += n_tokens
            positions += ids.numel()
            seq_sum += ids.shape[1]
            if self.device.type == "cuda":
                # the config guarantees the table; skip the per-call host sync
                unwrapped(self.forward).validate_inputs = False
        return loss_sum, tokens, positions, seq_sum

    def micro_batch(self, *, last_micro: bool,
                    accum: int) -> tuple[list[torch.Tensor], torch.Tensor, int]:
        """The next micro-batch's forward/backward calls, as the progressive loss plans them.

        Returns each call's weighted (detached) loss, the input ids and the token count."""
        tc = self.tc
        batch, width = self.padding.shape(
            self.stream.batch(self.micro_index, self.mbs, self.rank, self.world))
        calls = plan_calls(self.recurrences, self.limit, tc.alpha,
                           micro_batch_generator(self.cfg.seed, self.micro_index, self.draw_rank),
                           self.offsets)
        self.micro_index += 1
        ids = batch.input_ids.to(self.device, non_blocking=True)
        mask = batch.target_mask.to(self.device, non_blocking=True)
        # each rank's loss is its share of the global micro-batch's loss (the gradient all-reduce
        # averages)
        denom = self.parallel.denominator(
            loss_denominator(batch.input_ids, batch.target_mask, reduction=tc.loss_reduction,
                             mask_before_equals=tc.mask_before_equals,
                             line_length=self.line_length),
            tc.loss_reduction)
        losses = []
        for c, call in enumerate(calls):
            last = last_micro and c == len(calls) - 1
            extra = {} if call.abacus_offset is None else {"abacus_offset": call.abacus_offset}
            extra |= self.padding.noise(unwrapped(self.forward), ids, width)
            with self.parallel.backward_context(self.forward, last=last):
                with self.precision.autocast():
                    logits = self.forward(ids, recurrences=call.n + call.k,
                                          grad_recurrences=call.k, **extra)
                ce = answer_loss(logits, ids, mask, reduction=tc.loss_reduction,
                                 mask_before_equals=tc.mask_before_equals, denominator=denom)
                self.scaler.scale(
                    ce * (call.weight * self.throttle * self.world / accum)
                ).backward()
            self.weights.collect()  # bf16-pure: this backward's gradients join the fp32 sums
            losses.append(ce.detach() * call.weight)
        return losses, ids, int(batch.lengths.sum())

    def unscale_and_clip(self) -> float:
        """Unscale the gradients (fp16), clip them to `train.grad_clip` (0: no clipping) and return
        their total norm, this rank's (a host synchronisation: the step must know it
        before the optimiser runs)."""
        self.scaler.unscale_(self.optimizer)  # a no-op without fp16's scaler
        params = [p for p in self.model.parameters() if p.grad is not None]
        if self.tc.grad_clip > 0:
            return float(torch.nn.utils.clip_grad_norm_(params, self.tc.grad_clip))
        return float(torch.nn.utils.get_total_norm([p.grad for p in params]))

    def sync(self, loss_sum: float = 0.0, tokens: float = 0.0,
             grad_norm: float = 0.0) -> tuple[float, float, float]:
        """Adopt rank 0's clock; sum the step's loss, tokens and gradient norms over ranks (one
        all-reduce). The summed norm is finite iff every rank's is: all ranks then take the same
        divergence decision."""
        elapsed, loss_sum, tokens, grad_norm = self.parallel.agree(
            [self.budget.local_elapsed_s(), loss_sum, tokens, grad_norm], from_rank0=1)
        if self.world > 1:
            self.budget.set_session_elapsed(elapsed)
        return loss_sum, tokens, grad_norm

    def count_step(
        self, accum: int, step_loss: float, tokens_all: int, positions: int, seq_sum: int
    ) -> None:
        """Advance the budget and the report windows by one step (loss and tokens already agreed
        over ranks); recompute the batch size from the ramp."""
        budget = self.budget
        budget.step += 1
        budget.samples += accum * self.mbs_eff
        self.tokens_total += tokens_all
        self.losses.append(step_loss)
        for w in (self.since_report, self.since_start):
            w.add_step(
                samples=accum * self.mbs_eff,
                tokens=tokens_all,
                positions=positions * self.world,
                loss=step_loss,
                seq_len_sum=seq_sum,
                micro_batches=accum,
            )
        self.batch_size = ramped_batch_size(
            budget.fraction(), self.tc.global_batch, self.mbs_eff, self.tc.batch_ramp
        )

    def checkpoint_validate_report(self, step_loss: float, lr: float) -> None:
        """The checkpoint, validation and report the cadence calls for after this step."""
        fraction, now = self.budget.fraction(), self.budget.session_elapsed_s()
        due = self.cadence.after_step(now, fraction, self.budget.step)
        saved = self.save(fraction, step_loss) if due.checkpoint else None  # rank 0 writes
        if due.validation:
            self.run_validation()
        if due.report:
            self.emit(self.since_report, fraction, lr, final=False, saved=saved)
            self.since_report = Window(start_s=now)

    # --- what a step calls on ------------------------------------------------------------------

    def run_validation(self) -> None:
        """Score validation without touching the training RNG streams or leaving eval mode on."""
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            self.validated.update(self.validation(self.model), validation_step=self.budget.step)
        self.model.train()

    def save(self, fraction: float, loss: float) -> tuple[str, str] | None:
        """Rank 0 writes a numbered checkpoint with every rank's RNG streams (gathered: all ranks
        call this at the same step; the others may lack a checkpoint_dir)."""
        rngs = every_rank_rng_state(self.parallel.process_group)
        if self.rank != 0 or self.root is None:
            return None
        state = {
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "micro_index": self.micro_index,
            "tokens": self.tokens_total,
            "rng": rngs,
            "world_size": self.world,
            "budget_fraction": fraction,
            "batch_size": self.batch_size,
            "loss": loss,
            "seed": self.cfg.seed,
            **self.budget.state(),
        }
        target = self.root / ckpt.checkpoint_name(self.budget.step)
        model_id = ckpt.save_checkpoint(storage.on_disk(target), self.model, self.cfg, state)
        ckpt.prune_checkpoints(storage.on_disk(self.root), ckpt.KEPT_CHECKPOINTS)
        return str(target), model_id

    def emit(self, window: Window, fraction: float, lr: float, *, final: bool,
             saved: tuple[str, str] | None) -> dict:
        """Build a progress report from `window` (plus the latest validation scores) and pass it to
        `report`."""
        budget, losses = self.budget, self.losses
        now = budget.session_elapsed_s()
        rates = window.rates(now)
        # the final report: rates over the session, loss over its last 10 steps
        if final and losses:
            rates["loss"] = sum(losses[-10:]) / len(losses[-10:])
        metrics = {
            "step": budget.step,
            "samples": budget.samples,
            "tokens": self.tokens_total,
            "loss": rates["loss"],
            "lr": lr,
            "batch_size": self.batch_size,
            "tokens_per_s": rates["tokens_per_s"],
            "samples_per_s": rates["samples_per_s"],
            "budget_fraction": fraction,
            "device_hours": budget.device_hours,
            "eta_s": eta_seconds(fraction, self.fraction_start, now),
            "elapsed_s": now,
            "rank": self.rank,
            "world_size": self.world,
            "final": final,
            "checkpoint": saved[0] if saved else None,
            "model_id": saved[1] if saved else None,
        }
        metrics.update(self.validated)
        if self.diverged_at is not None:
            metrics["diverged_at_step"] = self.diverged_at
        if self.peak is not None and rates["mean_seq_len"] > 0:
            flops = self.model.flops_per_token(round(rates["mean_seq_len"]), self.depth_total,
                                               grad_recurrences=self.depth_grad)
            metrics["mfu"] = flops * rates["positions_per_s"] / (self.peak * self.world)
        if self.report is not None:
            self.report(metrics)
        return metrics


def train(cfg: ExperimentConfig, device: str | torch.device = "cpu", *, process_group: Any = None,
          report: Callable[[dict], None] | None = None, checkpoint_dir: Path | None = None,
          resume_from: Location | None = None,
          validation: Callable[[nn.Module], dict[str, float]] | None = None) -> TrainResult:
    """Train `cfg`'s model until its budget is spent; see the module docstring.

    process_group: a `torch.distributed` group (e.g. `dist.group.WORLD` under Ray Train) for DDP;
        None trains in this process alone even if a default group exists.
    checkpoint_dir: root on this disk for numbered checkpoints `step-NNNNNNNNN/` (rank 0 writes;
        newest 2 kept).
    resume_from: a checkpoint (local or in an object store), or a root whose latest checkpoint is
        used, resolved by the caller; its weights pass the checks every loader runs
        (`model.checkpoint.read_checked`).
    validation: scores the model every `eval.validation_every` steps, at the start and at the end
        (`evaluation.validation.Validation`); its numbers join every later report. It runs under a
        forked RNG and the model goes back to train mode, so the trained weights are the same with
        or without it.
    """
    device = _resolve_device(device)
    check_fits(cfg, device)
    return _Session(cfg, device, process_group, report, checkpoint_dir, resume_from,
                    validation).run()
