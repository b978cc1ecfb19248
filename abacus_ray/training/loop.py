"""`train`: the budgeted, resumable, data-parallel training loop (docs/official-code.md §4.13, §6).

One optimiser step = `accumulation_steps(batch, micro_batch x world)` micro-batches, each a forward
and backward of the progressive loss divided by the accumulation count; then unscale, clip to 0.5
over all parameters, AdamW. Before each step the lr is set from the trapezoid at the current budget
fraction f; after it, the batch size is recomputed from the ramp. Training stops at a step boundary
once f >= 1 (the official code checks after every micro-batch; stopping mid-accumulation would
waste it).

Determinism: the data of micro-batch i is `TrainStream.batch(i, ...)` and its progressive-loss depth
and Abacus offset come from a generator seeded by (seed, i); the initial-state noise comes from the
global torch RNG, seeded per rank and saved in checkpoints. With a steps budget a run is therefore
a pure function of its config, and N steps straight equal N/2 + resume + N/2 bit for bit on CPU.

Reports: `report(dict)` is called every `report_every_s` seconds of agreed wall time, whenever a
checkpoint is written (the dict then carries `checkpoint` and `model_id` on rank 0) and once at the
end (`final: True`). Under DDP every rank calls it at the same steps (Ray Train wants all workers to
report); only rank 0 writes checkpoints.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from abacus_ray.config import ExperimentConfig
from abacus_ray.model import checkpoint as ckpt
from abacus_ray.model.positions import OffsetDraw
from abacus_ray.model.precision import resolve_precision
from abacus_ray.training.budget import Budget
from abacus_ray.training.distributed import agree, global_denominator, rank_and_world, wrap_ddp
from abacus_ray.training.objective import answer_loss, loss_denominator
from abacus_ray.training.optimizer import build_optimizer, set_lr
from abacus_ray.training.progressive import (
    backprop_limit,
    expected_depths,
    micro_batch_generator,
    plan_calls,
    throttle_factor,
)
from abacus_ray.training.schedules import accumulation_steps, lr_multiplier, ramped_batch_size
from abacus_ray.training.seeding import rank_seed, rng_state, seed_all, set_rng_state
from abacus_ray.training.throughput import Window, eta_seconds, peak_flops

KEEP_CHECKPOINTS = 2  # numbered checkpoints kept in a run's checkpoint root (older ones are pruned)


@dataclass
class TrainResult:
    checkpoint: str | None  # final checkpoint directory (None without a checkpoint_dir)
    model_id: str  # sha256 of the final weights
    metrics: dict  # the final report
    losses: list[float] = field(default_factory=list)  # mean loss of every optimiser step of this session
    model: nn.Module | None = None  # the trained model (unwrapped, eval mode)


def _check_resumable(cfg: ExperimentConfig, saved: ExperimentConfig, path: Path) -> None:
    """The model, task and seed must match the checkpoint; training settings may change (e.g. a longer budget)."""
    for section in ("seed", "task", "model"):
        if getattr(cfg, section) != getattr(saved, section):
            mine, theirs = cfg.to_dict()[section], saved.to_dict()[section]
            if isinstance(mine, dict):
                diff = [k for k in mine if mine[k] != theirs.get(k)]
                section = f"{section}.{diff[0]}" if diff else section
            raise ValueError(f"resume_from: {path} was trained with a different {section}")


def train(cfg: ExperimentConfig, device: str | torch.device = "cpu", *, process_group: Any = None,
          report: Callable[[dict], None] | None = None, checkpoint_dir: str | Path | None = None,
          resume_from: str | Path | None = None,
          probe: Callable[[nn.Module], dict[str, float]] | None = None) -> TrainResult:
    """Train `cfg`'s model until its budget is spent; see the module docstring.

    process_group: a `torch.distributed` group (e.g. `dist.group.WORLD` under Ray Train) for DDP;
        None trains in this process alone even if a default group exists.
    checkpoint_dir: root for numbered checkpoints `step-NNNNNNNNN/` (rank 0 writes; newest 2 kept).
    resume_from: a checkpoint directory, or a root whose latest checkpoint is used.
    probe: scores the model every `eval.probe_every` steps, at the start and at the end
        (`evaluation.probe.Probe`); its numbers join every later report. It runs under a forked RNG
        and the model goes back to train mode, so the trained weights are the same with or without it.
    """
    from abacus_ray.model.transformer import ArithmeticTransformer
    from abacus_ray.tasks.stream import TrainStream, pad_batch, padded_length

    tc = cfg.train
    device = torch.device(device)
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.set_float32_matmul_precision("high")  # TF32 where fp32 matmuls remain (docs/official-code.md §6.6)
    rank, world = rank_and_world(process_group)
    root = Path(checkpoint_dir) if checkpoint_dir is not None else None

    seed_all(cfg.seed)  # identical initial weights on every rank
    model = ArithmeticTransformer.for_experiment(cfg)
    saved_state = None
    if resume_from is not None:
        path = ckpt.resolve_checkpoint(resume_from)
        _check_resumable(cfg, ckpt.read_checkpoint_config(path), path)
        weights = ckpt.load_weights_file(path / ckpt.MODEL_FILE)
        try:
            model.load_state_dict(weights)
        except RuntimeError as e:
            raise ValueError(f"{path / ckpt.MODEL_FILE}: weights do not fit the configured model ({e})") from None
        saved_state = ckpt.load_weights_file(path / ckpt.STATE_FILE)
    model.to(device).train()

    optimizer = build_optimizer(model, tc, device)
    precision = resolve_precision(tc.precision, device)
    scaler = precision.grad_scaler()
    budget = Budget.from_config(cfg, world)
    micro_index, tokens_total = 0, 0
    if saved_state is not None:
        optimizer.load_state_dict(saved_state["optimizer"])
        if saved_state.get("scaler"):
            scaler.load_state_dict(saved_state["scaler"])
        budget.restore(saved_state)
        micro_index, tokens_total = int(saved_state["micro_index"]), int(saved_state["tokens"])
        if rank == 0 and saved_state.get("rng"):
            set_rng_state(saved_state["rng"][0])
        else:  # only rank 0's RNG streams are saved; the others restart theirs from (seed, rank, step)
            seed_all(rank_seed(cfg.seed, rank) + 7919 * budget.step)
    else:
        seed_all(rank_seed(cfg.seed, rank))

    net: nn.Module = model
    ddp = None
    if world > 1:
        unused = cfg.model.injection == "none" and cfg.model.recurrences > 1
        net = ddp = wrap_ddp(net, device, process_group, find_unused=unused)
    fixed_len = None
    if tc.compile:  # the block alone, on batches of one fixed length (see `compile_block`)
        model.compile_block()
        fixed_len = padded_length(cfg.task)

    stream = TrainStream(cfg.task, cfg.seed)
    mbs, mbs_eff = tc.micro_batch, tc.micro_batch * world
    recurrences = cfg.model.recurrences
    limit = backprop_limit(recurrences, tc.max_backprop)
    throttle = throttle_factor(recurrences, limit) if tc.throttle else 1.0
    offsets = OffsetDraw.of(cfg)
    depth_total, depth_grad = expected_depths(recurrences, limit, tc.alpha)
    peak = peak_flops(device)
    losses: list[float] = []
    probed: dict[str, float] = {}

    def run_probe() -> None:
        """Score the probe without touching the training RNG streams or leaving eval mode on."""
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            probed.update(probe(model), probe_step=budget.step)
        model.train()

    def sync(loss_sum: float = 0.0, tokens: float = 0.0) -> tuple[float, float]:
        """Adopt rank 0's clock; sum the step's loss and tokens over ranks."""
        elapsed, loss_sum, tokens = agree([budget.local_elapsed_s(), loss_sum, tokens], rank=rank,
                                          process_group=process_group, device=device, from_rank0=1)
        if world > 1:
            budget.set_session_elapsed(elapsed)
        return loss_sum, tokens

    def save(fraction: float, loss: float) -> tuple[str, str] | None:
        """Rank 0 writes a numbered checkpoint (no collective: other ranks may lack a checkpoint_dir)."""
        if rank != 0 or root is None:
            return None
        state = {"optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(), "micro_index": micro_index,
                 "tokens": tokens_total, "rng": [rng_state()], "world_size": world, "budget_fraction": fraction,
                 "batch_size": batch_size, "loss": loss, "seed": cfg.seed, **budget.state()}
        target = root / ckpt.checkpoint_name(budget.step)
        model_id = ckpt.save_checkpoint(target, model, cfg, state)
        ckpt.prune_checkpoints(root, KEEP_CHECKPOINTS)
        return str(target), model_id

    def emit(window: Window, fraction: float, lr: float, *, final: bool, saved: tuple[str, str] | None) -> dict:
        now = budget.session_elapsed_s()
        rates = window.rates(now)
        if final and losses:  # the final report: rates over the session, loss over its last 10 steps
            rates["loss"] = sum(losses[-10:]) / len(losses[-10:])
        metrics = {"step": budget.step, "samples": budget.samples, "tokens": tokens_total, "loss": rates["loss"],
                   "lr": lr, "batch_size": batch_size, "tokens_per_s": rates["tokens_per_s"],
                   "samples_per_s": rates["samples_per_s"], "budget_fraction": fraction,
                   "device_hours": budget.device_hours, "eta_s": eta_seconds(fraction, fraction_start, now),
                   "elapsed_s": now, "rank": rank, "world_size": world, "final": final,
                   "checkpoint": saved[0] if saved else None, "model_id": saved[1] if saved else None}
        metrics.update(probed)
        if peak is not None and rates["mean_seq_len"] > 0:
            flops = model.flops_per_token(round(rates["mean_seq_len"]), depth_total, grad_recurrences=depth_grad)
            metrics["mfu"] = flops * rates["positions_per_s"] / (peak * world)
        if report is not None:
            report(metrics)
        return metrics

    budget.start()
    if probe is not None:
        run_probe()
    sync()
    fraction_start = budget.fraction()
    batch_size = ramped_batch_size(fraction_start, tc.global_batch, mbs_eff, tc.batch_ramp)
    window = Window(start_s=budget.session_elapsed_s())
    session = Window(start_s=window.start_s)  # the final report's rates cover the whole session
    last_report_s = last_ckpt_s = window.start_s
    lr = 0.0
    while (fraction := budget.fraction()) < 1.0:
        accum = accumulation_steps(batch_size, mbs_eff)
        lr = tc.lr * lr_multiplier(fraction, tc.warmup, tc.cooldown, first_call=budget.step == 0)
        set_lr(optimizer, lr)
        loss_sum = torch.zeros((), device=device)
        tokens = positions = seq_sum = 0
        for a in range(accum):
            batch = stream.batch(micro_index, mbs, rank, world)
            if fixed_len is not None:
                batch = pad_batch(batch, fixed_len)
            calls = plan_calls(recurrences, limit, tc.alpha, micro_batch_generator(cfg.seed, micro_index), offsets)
            micro_index += 1
            ids = batch.input_ids.to(device, non_blocking=True)
            mask = batch.target_mask.to(device, non_blocking=True)
            # each rank's loss is its share of the global micro-batch's loss (DDP then averages grads)
            local = loss_denominator(batch.input_ids, batch.target_mask, reduction=tc.loss_reduction,
                                     mask_before_equals=tc.mask_before_equals)
            denom = global_denominator(local, mbs, ids.shape[1], reduction=tc.loss_reduction, world=world,
                                       process_group=process_group, device=device)
            for c, call in enumerate(calls):
                last = a == accum - 1 and c == len(calls) - 1
                no_sync = ddp.no_sync() if ddp is not None and not last else contextlib.nullcontext()
                extra = {} if call.abacus_offset is None else {"abacus_offset": call.abacus_offset}
                with no_sync:
                    with precision.autocast():
                        logits = net(ids, recurrences=call.n + call.k, grad_recurrences=call.k, **extra)
                    ce = answer_loss(logits, ids, mask, reduction=tc.loss_reduction,
                                     mask_before_equals=tc.mask_before_equals, denominator=denom)
                    scaler.scale(ce * (call.weight * throttle * world / accum)).backward()
                loss_sum += ce.detach() * call.weight
            tokens += int(batch.lengths.sum())
            positions += ids.numel()
            seq_sum += ids.shape[1]
            if device.type == "cuda":
                model.validate_inputs = False  # the config guarantees the table; skip the per-call host sync
        if tc.grad_clip > 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

        budget.step += 1
        budget.samples += accum * mbs_eff
        loss_all, tokens_all = sync(float(loss_sum) / accum, tokens)
        step_loss = loss_all
        tokens_total += int(tokens_all)
        losses.append(step_loss)
        for w in (window, session):
            w.add_step(samples=accum * mbs_eff, tokens=int(tokens_all), positions=positions * world,
                       loss=step_loss, seq_len_sum=seq_sum, micro_batches=accum)
        fraction = budget.fraction()
        batch_size = ramped_batch_size(fraction, tc.global_batch, mbs_eff, tc.batch_ramp)

        now = budget.session_elapsed_s()
        saved = None
        if fraction < 1.0 and now - last_ckpt_s >= tc.checkpoint_every_min * 60:
            last_ckpt_s = now
            saved = save(fraction, step_loss)
        fresh = probe is not None and budget.step % cfg.eval.probe_every == 0
        if fresh:
            run_probe()
        if fraction < 1.0 and (saved is not None or fresh or now - last_report_s >= tc.report_every_s):
            emit(window, fraction, lr, final=False, saved=saved)
            last_report_s = now
            window = Window(start_s=now)

    fraction = budget.fraction()
    if probe is not None and budget.step % cfg.eval.probe_every != 0:
        run_probe()
    final_saved = save(fraction, losses[-1] if losses else math.nan)  # periodic saves stop short of f = 1
    metrics = emit(session, fraction, lr, final=True, saved=final_saved)
    model.eval()
    model_id = final_saved[1] if final_saved else ckpt.model_id_of(model)
    return TrainResult(final_saved[0] if final_saved else None, model_id, metrics, losses, model)
