"""The compiled recurrent block through everything a long run does, and `train.compile`'s default.

A long GPU run changes the progressive loss's (n, k) and the Abacus offset every micro-batch, the
batch ramp changes the accumulation count, validations score the model in eval mode at other lengths,
checkpoints are written and a run may resume in the same process. The compiled block must see none
of that as a new shape: a recompile storm costs minutes, and the H100 crashed with "invalid shape
dimension" inside a graph that a recompile had made dynamic. Compiled here through AOTAutograd
(`aot_eager`, the path inductor takes minus code generation), so the forward/backward partition is
exercised on CPU in seconds.
"""

import math
import shutil

import pytest
import torch

from abacus_ray.config import preset
from abacus_ray.config.train import resolved_compile
from abacus_ray.evaluation.validation import Validation
from abacus_ray.storage import on_disk
from abacus_ray.training.loop import train

# A 1 x 4 loop: n ~ U{0..3}, k up to 2, so every autograd situation of the block occurs; Abacus
# k <= 6; a batch ramp 8 -> 24 (1 to 3 micro-batches a step); a validation in eval mode every 3 steps.
LONG_RUN = ["model.hidden=32", "model.intermediate=64", "model.heads=4", "model.layers=1", "model.recurrences=4",
            "model.abacus_table=24", "model.max_k=6", "task.train_max_len=5", "train.lr=3e-3",
            "train.micro_batch=8", "train.global_batch=24", "train.batch_ramp=0.6", "train.budget_hours=1000",
            "train.report_every_s=1000", "train.checkpoint_every_min=1e-9", "train.max_steps=12",
            "train.compile=true", "eval.validation_lengths=2,7", "eval.validation_every=3", "eval.validation_per_cell=8"]


class GraphCounter:
    """A torch.compile backend: AOTAutograd with eager kernels, recording every graph Dynamo hands it."""

    def __init__(self) -> None:
        self.inputs: list[list] = []

    def __call__(self, gm, example_inputs):
        self.inputs.append(list(example_inputs))
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    def symbolic(self) -> list:
        """Every symbolic size or int among the graphs' inputs (none may exist under dynamic=False)."""
        out = []
        for inputs in self.inputs:
            for x in inputs:
                sizes = x.shape if isinstance(x, torch.Tensor) else [x]
                out += [s for s in sizes if isinstance(s, torch.SymInt)]
        return out


@pytest.fixture
def counted_compile(monkeypatch):
    torch._dynamo.reset()
    counter = GraphCounter()
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real(fn, **{**kw, "backend": counter}))
    yield counter
    torch._dynamo.reset()


@pytest.mark.slow  # torch.compile (aot_eager), three sessions: ~15 s
def test_compiled_block_survives_depths_offsets_ramp_validations_and_a_resume_without_recompiling(counted_compile, tmp_path):
    cfg = preset("tiny", LONG_RUN)
    halfway = tmp_path / "halfway"

    def keep_halfway(metrics):
        if metrics["step"] == 6 and metrics["checkpoint"]:
            shutil.copytree(metrics["checkpoint"], halfway)

    sizes = []
    straight = train(cfg, report=lambda m: (sizes.append(m["batch_size"]), keep_halfway(m)),
                     checkpoint_dir=tmp_path / "a", validation=Validation(cfg))
    assert len(straight.losses) == 12 and all(math.isfinite(x) for x in straight.losses)
    assert min(sizes) == 8 and max(sizes) == 24  # the ramp ran: 1 to 3 micro-batches a step
    # one graph per autograd situation (no grad; grad on a fresh state; grad on a state with history)
    assert len(counted_compile.inputs) == 3
    assert counted_compile.symbolic() == []  # static shapes only: nothing for a later recompile to turn dynamic
    assert straight.model._compiled_block is None and "validation" in straight.metrics
    # a resumed run in the same process (a new model, new optimiser): not one recompile
    with torch._dynamo.config.patch(error_on_recompile=True):
        resumed = train(cfg, resume_from=on_disk(halfway), validation=Validation(cfg))
    assert len(counted_compile.inputs) == 3
    assert resumed.losses == straight.losses[6:] and resumed.model_id == straight.model_id


@pytest.mark.slow  # torch.compile (aot_eager) and an eager twin, 2 x 200 steps: ~60 s of CPU
def test_compiled_block_trains_the_eager_loss_curve(monkeypatch, counted_compile):
    """The compiled block against the same loop with `torch.compile` a no-op (same padding, data and
    noise). Measured with aot_eager on CPU (torch 2.13): identical losses for all 200 steps. Allowed:
    1e-4 relative per step, room for a decomposition that reorders a float sum; inductor's fused
    kernels are compared in benchmarks/train_step.py, not here (minutes of C++ compilation)."""
    cfg = preset("tiny", LONG_RUN[:-3] + ["model.recurrences=2", "train.max_steps=200",
                                           "train.checkpoint_every_min=1000"])
    compiled = train(cfg).losses
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    eager = train(cfg).losses
    assert len(counted_compile.inputs) == 2  # R = 2, M = 1: no grad, or grad on a fresh state
    worst = max(abs(a - b) / b for a, b in zip(compiled, eager, strict=True))
    print(f"compiled vs eager: max relative loss difference per step {worst:.2e}")
    assert worst < 1e-4, worst
    assert sum(eager[-20:]) < 0.8 * sum(eager[:20])


def test_compile_default_is_on_for_cuda_and_off_elsewhere():
    assert preset("tiny").train.compile is None
    assert resolved_compile(None, "cuda") and not resolved_compile(None, "cpu")
    assert resolved_compile(True, "cpu") and not resolved_compile(False, "cuda")
    assert preset("tiny", ["train.compile=false"]).train.compile is False
    assert preset("tiny", ["train.compile=null"]).train.compile is None


def test_randomised_fire_trains_eager_whatever_the_compile_setting():
    """Its positions are drawn at the batch's width inside the block; a compiled block's padding would
    give the real tokens other positions, so compiling would change the model, not only its speed."""
    assert not resolved_compile(None, "cuda", randomised_fire=True)
    with pytest.raises(ValueError, match="^train.compile: randomised FIRE"):
        preset("tiny", ["model.positions=fire", "model.fire_max_length=64", "train.compile=true"])
    assert preset("tiny", ["model.positions=fire", "model.fire_max_length=64"]).train.compile is None


@pytest.mark.slow  # torch.compile (an eager backend: only Dynamo's tracing and the padding count)
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_compiling_trains_the_same_objective_as_eager(monkeypatch, reduction):
    """`train.compile` is execution-only: a compiled block trains on batches padded to the task's
    longest line, eager on batches padded to their own longest row. Under `loss_reduction=none` the
    loss used to be divided by that padded width, so compiling reweighted every batch (Fig. 6); now
    both divide by the task's longest line and the same micro-batches give the same losses."""
    torch._dynamo.reset()
    real = torch.compile
    monkeypatch.setattr(torch, "compile",
                        lambda fn, **kw: real(fn, **{**kw, "backend": lambda gm, _: gm.forward}))
    # 1 x 1: no progressive loss, so both runs draw the same depths; size-5 lines vary in width.
    # A learning rate of 1e-12 keeps the weights where they start (Adam's first steps move a weight
    # by about lr whatever its gradient, so float noise in near-zero gradients would otherwise move
    # both runs apart): each step's loss is then that micro-batch's loss under the one objective.
    same = [*LONG_RUN[:5], "model.recurrences=1", *LONG_RUN[5:7], "train.lr=1e-12", *LONG_RUN[9:13],
            "train.max_steps=6", f"train.loss_reduction={reduction}"]
    eager = train(preset("tiny", [*same, "train.compile=false"]))
    compiled = train(preset("tiny", [*same, "train.compile=true"]))
    torch.testing.assert_close(torch.tensor(compiled.losses), torch.tensor(eager.losses),
                               rtol=1e-5, atol=0)
