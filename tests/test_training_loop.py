"""The training loop: budgets, reports, checkpoints, bit-identical resume, DDP equivalence."""

import json
import math
import re
import shutil
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from abacus_ray.config import preset
from abacus_ray.evaluation.validation import Validation
from abacus_ray.model.checkpoint import (
    content_hash,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
)
from abacus_ray.storage import on_disk
from abacus_ray.tasks.stream import padded_length
from abacus_ray.tasks.tokenizer import get_tokenizer
from abacus_ray.training.loop import train

# A small 1 x 2 looped model (progressive loss draws n in {0, 1}), noise initial state, Abacus k <= 6,
# warm-up, cool-down and a batch ramp 8 -> 24 with accumulation: every moving part of the loop.
SMALL = ["model.hidden=32", "model.intermediate=64", "model.heads=4", "model.layers=1", "model.recurrences=2",
         "model.abacus_table=16", "model.max_k=6", "task.train_max_len=3", "train.lr=3e-3",
         "train.micro_batch=8", "train.global_batch=24", "train.batch_ramp=0.6", "train.budget_hours=1000",
         "train.report_every_s=1000", "train.checkpoint_every_min=1000"]


def small(*extra):
    return preset("tiny", SMALL + list(extra))


def params(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_steps_budget_schedule_and_reports(tmp_path):
    reports = []
    result = train(small("train.max_steps=12"), report=reports.append, checkpoint_dir=tmp_path)
    assert len(result.losses) == 12 and all(math.isfinite(x) for x in result.losses)
    final = reports[-1]
    assert final["final"] and final["step"] == 12 and final["budget_fraction"] == pytest.approx(1.0)
    # the last step (11 of 12 done) is in the cool-down: (12e6 - 11e6) / 1.2e6 of the peak
    assert final["lr"] == pytest.approx(3e-3 * 1e6 / 1.2e6, rel=1e-5)
    # batch ramp over 60 % of 12 steps: 8 at first, 24 at the end; samples add up
    assert final["batch_size"] == 24 and final["samples"] == result.metrics["samples"]
    assert final["samples"] > 12 * 8 and final["samples"] % 8 == 0
    assert final["checkpoint"] == result.checkpoint and final["model_id"] == result.model_id
    assert latest_checkpoint(on_disk(tmp_path)).name == "step-000000012"
    for key in ("tokens", "loss", "tokens_per_s", "samples_per_s", "device_hours", "eta_s"):
        assert key in final
    assert "mfu" not in final  # CPU: no peak FLOPs to compare with
    assert load_checkpoint(on_disk(result.checkpoint)).model_id == result.model_id


def test_validation_reports_without_changing_the_trained_model():
    """The validation (the search's early-stopping metric) scores during training but trains the same weights."""
    cfg = small("train.max_steps=10", "eval.validation_lengths=2,4", "eval.validation_every=4", "eval.validation_per_cell=8",
                "model.k_draw=balanced")
    reports, calls = [], []
    validation = Validation(cfg)

    def counting(model):
        scores = validation(model)
        calls.append(model.training)  # the validation scores in eval mode; the loop turns train mode back on
        return scores

    validated = train(cfg, report=reports.append, validation=counting)
    plain = train(cfg)
    assert validated.model_id == plain.model_id and validated.losses == plain.losses
    assert calls == [False] * 4  # at the start, steps 4 and 8, and the end (10)
    steps = [r["step"] for r in reports]
    assert steps == [4, 8, 10]  # a fresh validation is reported at once
    assert [r["validation_step"] for r in reports] == [4, 8, 10]  # the step each validation was scored at
    final = reports[-1]
    assert set(final) >= {"validation", "validation_2", "validation_4"}
    assert final["validation"] == pytest.approx((final["validation_2"] + final["validation_4"]) / 2)
    assert final["validation_2"] > final["validation_4"] or final["validation_4"] == 0.0  # 2 digits is in training, 4 beyond
    # the validation's problems are a validation set: not the final evaluation's (seed eval.seed + 1)
    from abacus_ray.tasks.evalsets import eval_problems
    assert [c.prompts_text for c in validation.cells][0] != [p.prompt for p in eval_problems("add", 2, 2, 8, 0)]


def test_resume_is_bit_identical(tmp_path):
    """N steps straight == N/2 steps, checkpoint, resume, N/2 steps (same schedule, data and noise)."""
    n = 8
    halfway = tmp_path / "halfway"

    def keep_halfway(metrics):
        if metrics["step"] == n // 2 and metrics["checkpoint"]:
            shutil.copytree(metrics["checkpoint"], halfway)

    cfg = small(f"train.max_steps={n}", "train.checkpoint_every_min=1e-9")  # a checkpoint every step
    straight = train(cfg, report=keep_halfway, checkpoint_dir=tmp_path / "a")
    assert load_checkpoint(on_disk(halfway)).meta["step"] == n // 2

    resumed = train(cfg, resume_from=on_disk(halfway), checkpoint_dir=tmp_path / "b")
    assert resumed.losses == straight.losses[n // 2:]
    a, b = params(straight.model), params(resumed.model)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.model_id == straight.model_id
    assert resumed.metrics["samples"] == straight.metrics["samples"]
    assert resumed.metrics["tokens"] == straight.metrics["tokens"]

    with pytest.raises(ValueError, match="^resume_from: .* different model.hidden"):
        train(small(f"train.max_steps={n}", "model.hidden=64", "model.heads=4"),
              resume_from=on_disk(halfway))


@pytest.mark.parametrize("spoil", ["nan", "hash"])
def test_resume_refuses_weights_that_evaluation_would_refuse(tmp_path, spoil):
    """Resuming reads weights through the same checks as every loader: weights holding NaN (with a
    meta.json made to match them) or weights whose hash is not meta.json's are one ValueError naming
    model.pt, before any training."""
    cfg = small("train.max_steps=1")
    train(cfg, checkpoint_dir=tmp_path / "run")
    target = latest_checkpoint(on_disk(tmp_path / "run")).as_path()
    weights = torch.load(target / "model.pt", weights_only=True)
    weights["decoder.weight"][0, 0] = math.nan if spoil == "nan" else weights["decoder.weight"][0, 0] + 1
    torch.save(weights, target / "model.pt")
    if spoil == "nan":
        meta = json.loads((target / "meta.json").read_text())
        (target / "meta.json").write_text(json.dumps({**meta, "model_id": content_hash(weights)}))
    expected = "decoder.weight holds 1 NaN" if spoil == "nan" else "does not match meta.json's model_id"
    with pytest.raises(ValueError, match=f"^{re.escape(str(target / 'model.pt'))}: .*{expected}") as e:
        train(small("train.max_steps=2"), resume_from=on_disk(tmp_path / "run"))
    assert "\n" not in str(e.value)


def test_time_and_sample_budgets_stop_training():
    by_time = train(small("train.budget_hours=0.0002"))  # 0.72 device-seconds
    assert by_time.metrics["budget_fraction"] >= 1.0 and by_time.metrics["device_hours"] >= 0.0002
    by_samples = train(small("train.max_samples=100", "train.batch_ramp=0", "train.global_batch=16"))
    assert by_samples.metrics["step"] == 7 and by_samples.metrics["samples"] == 112


def test_precision_and_loss_options_run():
    base = ["train.max_steps=2"]
    for extra in (["train.precision=bf16"], ["train.loss_reduction=none", "train.throttle=true"],
                  ["train.mask_before_equals=false", "train.alpha=0.5"], ["model.init_state=zeros"]):
        result = train(small(*base, *extra))
        assert len(result.losses) == 2 and all(math.isfinite(x) for x in result.losses), extra


@pytest.mark.parametrize("clip", ["0.5", "0"])
def test_a_finite_loss_with_infinite_gradients_stops_the_run_before_the_weights_move(tmp_path, clip):
    """From step 4 on a gradient hook makes one weight's gradient infinite while the loss stays finite,
    as an overflowing backward does on some kernel sets. The clip factor (or, unclipped, AdamW) would
    turn that into NaN weights; the loop stops at step 4 before the optimiser runs and saves nothing:
    every checkpoint kept loads, the last is step 3's, and the model handed back is step 3's."""
    steps_done = []

    def arm(model):  # the validation is the loop's one callback that sees the training model (at the start)
        if not steps_done:
            steps_done.append(0)
            model.tok.weight.register_hook(lambda g: torch.full_like(g, math.inf) if steps_done[-1] >= 3 else g)
        return {}

    cfg = small("train.max_steps=8", "train.checkpoint_every_min=1e-9", f"train.grad_clip={clip}")
    result = train(cfg, report=lambda m: steps_done.append(m["step"]), checkpoint_dir=tmp_path, validation=arm)
    assert result.metrics["diverged_at_step"] == 4 and result.metrics["step"] == 3
    assert result.checkpoint is None and result.metrics["checkpoint"] is None
    assert len(result.losses) == 3 and all(math.isfinite(x) for x in result.losses)
    kept = [load_checkpoint(c) for c in list_checkpoints(on_disk(tmp_path))]  # each checked: finite, hash matches
    assert [c.meta["step"] for c in kept] == [2, 3]
    assert latest_checkpoint(on_disk(tmp_path)).name == "step-000000003"
    assert all(torch.isfinite(v).all() for v in result.model.state_dict().values() if v.is_floating_point())
    assert result.model_id == kept[-1].model_id


def _ddp_worker(rank, world, store, cfg_dict, out):
    torch.set_num_threads(1)
    from abacus_ray.config import ExperimentConfig
    from abacus_ray.training import loop

    drawn = []  # (n, k, Abacus offset) of every forward this rank planned
    planned = loop.plan_calls

    def recording(*args, **kwargs):
        calls = planned(*args, **kwargs)
        drawn.append([(c.n, c.k, c.abacus_offset) for c in calls])
        return calls

    loop.plan_calls = recording
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        result = train(ExperimentConfig.from_dict(cfg_dict), process_group=dist.group.WORLD)
        torch.save({"losses": result.losses, "params": params(result.model), "samples": result.metrics["samples"],
                    "draws": drawn}, f"{out}.{rank}")
        dist.barrier()  # no rank tears gloo down while the other still talks (seen once: SIGABRT at exit)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # spawns gloo ranks
def test_ddp_two_gloo_ranks_match_one_process(tmp_path):
    """Same global micro-batch (2 x 4 rows vs 1 x 8) and one shared draw of depth and offset: the same
    losses up to reduction order."""
    common = ["train.max_steps=6", "model.init_state=zeros", "train.global_batch=16", "train.worker_draws=shared"]
    single = train(small(*common, "train.micro_batch=8"))
    cfg = small(*common, "train.micro_batch=4")
    mp.spawn(_ddp_worker, args=(2, str(tmp_path / "store"), cfg.to_dict(), str(tmp_path / "out")), nprocs=2)
    ranks = [torch.load(tmp_path / f"out.{r}", weights_only=True) for r in range(2)]
    assert ranks[0]["losses"] == ranks[1]["losses"]  # every rank reports the global loss
    assert ranks[0]["draws"] == ranks[1]["draws"]  # shared: one offset and depth per global micro-batch
    assert ranks[0]["samples"] == single.metrics["samples"]
    assert ranks[0]["losses"] == pytest.approx(single.losses, rel=1e-4, abs=1e-5)
    ref = params(single.model)
    for r in ranks:
        for k, v in r["params"].items():
            torch.testing.assert_close(v, ref[k], rtol=1e-3, atol=1e-4)


@pytest.mark.slow  # spawns gloo ranks
def test_ddp_workers_draw_their_own_offsets_and_depths(tmp_path):
    """The default, as the official per-rank seeds (seed + 10 x rank): each of two workers draws its own
    Abacus offset and progressive-loss depth per micro-batch; rank 0 draws what one worker would, and
    the model stays one model (DDP averages the gradients)."""
    from abacus_ray.model.positions import OffsetDraw
    from abacus_ray.seeds import micro_batch_generator
    from abacus_ray.training.progressive import backprop_limit, plan_calls

    cfg = small("train.max_steps=4", "train.global_batch=16", "train.micro_batch=4")
    assert cfg.train.worker_draws == "per_worker"
    mp.spawn(_ddp_worker, args=(2, str(tmp_path / "store"), cfg.to_dict(), str(tmp_path / "out")), nprocs=2)
    ranks = [torch.load(tmp_path / f"out.{r}", weights_only=True) for r in range(2)]
    draws = [r["draws"] for r in ranks]
    assert len(draws[0]) == len(draws[1]) >= 4

    def expected(rank):
        limit = backprop_limit(cfg.model.recurrences, cfg.train.max_backprop)
        return [[(c.n, c.k, c.abacus_offset) for c in plan_calls(
            cfg.model.recurrences, limit, cfg.train.alpha, micro_batch_generator(cfg.seed, i, rank), OffsetDraw.of(cfg))]
            for i in range(len(draws[0]))]

    assert draws == [expected(0), expected(1)]
    differ = sum(a != b for a, b in zip(*draws, strict=True))
    assert differ >= len(draws[0]) // 2, draws
    assert {d[0][2] for d in draws[1]} != {0}  # the second worker's offsets are drawn, not fixed
    for k, v in ranks[0]["params"].items():
        torch.testing.assert_close(v, ranks[1]["params"][k], rtol=0, atol=0)


def _ddp_report_worker(rank, world, store, cfg_dict, out):
    torch.set_num_threads(1)
    from abacus_ray.config import ExperimentConfig

    reports = []
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        train(ExperimentConfig.from_dict(cfg_dict), process_group=dist.group.WORLD, report=reports.append,
              checkpoint_dir=Path(f"{out}.ckpt.{rank}"))
        torch.save([(r["step"], r["checkpoint"] is not None) for r in reports], f"{out}.{rank}")
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two spawned ranks: `make test`, not the edit loop
def test_ddp_ranks_report_at_the_same_steps_when_a_checkpoint_is_due(tmp_path):
    """Under Ray Train a report is a barrier over the workers: a periodic checkpoint (written by rank 0
    only) must still make every rank report, or the others walk into the next all-reduce and the trial
    hangs (seen: a 2-node DDP trial stuck at its first 1-minute checkpoint on a loaded machine)."""
    cfg = small("train.max_steps=3", "train.global_batch=16", "train.micro_batch=4",
                "train.checkpoint_every_min=1e-9", "train.report_every_s=1e9")
    mp.spawn(_ddp_report_worker, args=(2, str(tmp_path / "store"), cfg.to_dict(), str(tmp_path / "out")), nprocs=2)
    ranks = [torch.load(tmp_path / f"out.{r}", weights_only=True) for r in range(2)]
    assert [s for s, _ in ranks[0]] == [s for s, _ in ranks[1]] == [1, 2, 3]  # steps 1, 2 periodic; 3 final
    assert [c for _, c in ranks[0]] == [True, True, True] and [c for _, c in ranks[1]] == [False] * 3


@pytest.mark.slow  # torch.compile
def test_compiled_training_survives_changing_depths_offsets_and_lengths(monkeypatch):
    """`train.compile` used to wrap the whole forward: after the first recompile the progressive loss's
    (n, k) and the Abacus offset turned symbolic and Dynamo crashed (on CPU at
    `set_grad_enabled(r >= first_grad)`; in the H100 run as "invalid shape dimension").
    Now only the recurrent block is compiled, on batches padded to one length: a 1 x 4 loop, whose
    (n, k), offset and batch lengths change every call, trains through, with a fixed handful of graphs."""
    torch._dynamo.reset()
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real(fn, **{**kw, "backend": counting_backend}))
    cfg = small("train.max_steps=8", "train.compile=true", "model.recurrences=4", "task.train_max_len=5")
    result = train(cfg)
    assert len(result.losses) == 8 and all(math.isfinite(x) for x in result.losses)
    # at most one graph per autograd situation (no grad; grad on a fresh state; grad on a state with
    # history), none for a new (n, k), offset or batch length
    assert 1 <= len(graphs) <= 3
    model = result.model.train()
    tok = get_tokenizer("pad")
    ids = torch.tensor([tok.encode("12+3=42", eos=True), tok.encode("99+9=801", eos=True)[:8]])
    length = padded_length(cfg.task)  # the fixed length: the longest size-5 line + EOS
    assert length == 19
    ids = torch.nn.functional.pad(ids, (0, length - ids.shape[1]))
    noise = torch.randn(2, length, 32)
    assert model._compiled_block is None  # the trained model is handed back eager
    model.compile_block()
    compiled = model(ids, noise=noise, abacus_offset=2, recurrences=3, grad_recurrences=1)
    model.drop_compiled_block()
    torch.testing.assert_close(compiled, model(ids, noise=noise, abacus_offset=2, recurrences=3, grad_recurrences=1))
