"""The parts of the training step chosen once at start-up (`training/cadence.py`, `padding.py`,
`parallel.py`), each alone; the step they make up is held bit for bit by the loop's tests (resume,
two gloo ranks, bf16-pure, compiled against eager)."""

from __future__ import annotations

import torch
from test_training_loop import small

from abacus_ray.model.transformer import ArithmeticTransformer
from abacus_ray.tasks.stream import TrainStream, padded_length
from abacus_ray.training.cadence import Cadence, Due
from abacus_ray.training.padding import Padding
from abacus_ray.training.parallel import DataParallel, unwrapped


def test_the_cadence_checkpoints_validates_and_reports_on_the_agreed_clock_and_step():
    c = Cadence.starting(100.0, checkpoint_every_s=60.0, report_every_s=10.0, validation_every=5)
    assert c.after_step(105.0, 0.1, 1) == Due(False, False, False)
    assert c.after_step(111.0, 0.2, 2) == Due(False, False, True)  # the report interval passed
    assert c.after_step(115.0, 0.3, 5) == Due(False, True, True)  # a validation is reported
    assert c.after_step(161.0, 0.4, 6) == Due(True, False, True)  # so is a checkpoint
    assert c.after_step(162.0, 0.5, 7) == Due(False, False, False)  # both clocks moved on
    # at f = 1 nothing periodic runs (the end saves and reports), but a due validation does
    assert c.after_step(500.0, 1.0, 10) == Due(False, True, False)
    quiet = Cadence.starting(0.0, 60.0, 10.0, validation_every=None)
    assert not quiet.after_step(1.0, 0.5, 5).validation


def test_eager_batches_keep_their_width_and_padded_ones_their_eager_noise():
    cfg = small()
    batch = TrainStream(cfg.task, cfg.seed).batch(0, 4, 0, 1)
    same, width = Padding(None).shape(batch)
    assert same is batch and width == batch.input_ids.shape[1]
    longest = padded_length(cfg.task)
    padded, width = Padding(longest).shape(batch)
    assert padded.input_ids.shape[1] == longest > width
    model = ArithmeticTransformer.for_experiment(cfg)
    assert Padding(longest).noise(model, batch.input_ids, width) == {}  # not padded: no noise
    torch.manual_seed(3)
    eager = model.initial_state(4, width)
    torch.manual_seed(3)
    noise = Padding(longest).noise(model, padded.input_ids, width)["noise"]
    assert noise.shape[:2] == (4, longest)
    assert torch.equal(noise[:, :width], eager) and not noise[:, width:].any()


def test_one_process_wraps_nothing_and_agrees_with_itself():
    parallel = DataParallel(None, torch.device("cpu"))
    model = torch.nn.Linear(2, 2)
    assert (parallel.rank, parallel.world) == (0, 1)
    assert parallel.wrap(model, ddp_wraps=True, find_unused=False) is model and not parallel.ddp
    assert unwrapped(model) is model
    model(torch.ones(1, 2)).sum().backward()
    before = model.weight.grad.clone()
    parallel.finish_gradients(model)
    assert torch.equal(model.weight.grad, before)
    assert parallel.agree([1.5, 2.0], from_rank0=1) == [1.5, 2.0]
    assert parallel.denominator(7, "mean") == 7
    with parallel.backward_context(model, last=False):
        pass
