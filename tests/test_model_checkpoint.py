"""Checkpoint I/O: weights-only files, stable content hash, atomic writes, clear errors."""

import json
import os
import pickle

import pytest
import torch

from abacus_ray.config import preset
from abacus_ray.model import checkpoint as ckpt
from abacus_ray.model.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    model_id_of,
    save_checkpoint,
)
from abacus_ray.model.transformer import ArithmeticTransformer
from abacus_ray.seeds import rng_state, set_rng_state
from abacus_ray.storage import on_disk

SMALL = ["model.hidden=32", "model.intermediate=64", "model.heads=4", "model.layers=1", "model.abacus_table=32"]


@pytest.fixture
def cfg():
    return preset("tiny", SMALL)


@pytest.fixture
def model(cfg):
    torch.manual_seed(0)
    return ArithmeticTransformer.for_experiment(cfg)


def _state(model):
    opt = torch.optim.AdamW(model.parameters())
    return {"optimizer": opt.state_dict(), "step": 7, "samples": 448, "micro_index": 7, "tokens": 5000,
            "device_hours": 0.01, "rng": [rng_state()], "loss": 1.5}


def test_round_trip(tmp_path, cfg, model):
    target = tmp_path / "step-000000007"
    model_id = save_checkpoint(on_disk(target), model, cfg, _state(model))
    assert len(model_id) == 64 and model_id == model_id_of(model)
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "meta.json", "model.pt", "train_state.pt"]
    # every file is weights-only loadable by plain torch
    weights = torch.load(target / "model.pt", weights_only=True)
    assert set(weights) == set(model.state_dict())
    state = torch.load(target / "train_state.pt", weights_only=True)
    assert state["step"] == 7 and isinstance(state["rng"][0]["torch"], torch.Tensor)
    meta = json.loads((target / "meta.json").read_text())
    assert meta["model_id"] == model_id and meta["step"] == 7 and meta["samples"] == 448

    loaded = load_checkpoint(on_disk(target))
    assert loaded.model_id == model_id and loaded.config == cfg and loaded.path == target
    assert not loaded.model.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.model.state_dict()[k]), k
    assert loaded.state["micro_index"] == 7
    # the id is a content hash: stable across save/load and re-saves, different for other weights
    assert save_checkpoint(on_disk(tmp_path / "again"), loaded.model, loaded.config, {}) == model_id
    with torch.no_grad():
        next(loaded.model.parameters()).add_(1e-3)
    assert model_id_of(loaded.model) != model_id


def test_rng_state_round_trips_through_weights_only_files(tmp_path):
    torch.manual_seed(3)
    saved = rng_state()
    torch.save(saved, tmp_path / "rng.pt")
    expected = (torch.rand(3), __import__("numpy").random.rand(), __import__("random").random())
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    again = (torch.rand(3), __import__("numpy").random.rand(), __import__("random").random())
    assert torch.equal(expected[0], again[0]) and expected[1:] == again[1:]


def test_latest_and_root_resolution(tmp_path, cfg, model):
    for step in (5, 40, 12):
        save_checkpoint(on_disk(tmp_path / ckpt.checkpoint_name(step)), model, cfg, {"step": step})
    (tmp_path / ".tmp-step-000000099-1-abc").mkdir()  # an interrupted write is never "latest"
    (tmp_path / "step-000000077").mkdir()  # nor is a directory without meta.json
    assert latest_checkpoint(on_disk(tmp_path)).name == "step-000000040"
    assert load_checkpoint(on_disk(tmp_path)).meta["step"] == 40
    ckpt.prune_checkpoints(on_disk(tmp_path), keep=2)
    assert [p.name for p in ckpt.list_checkpoints(on_disk(tmp_path))] == ["step-000000012", "step-000000040"]
    assert latest_checkpoint(on_disk(tmp_path / "nowhere")) is None
    with pytest.raises(FileNotFoundError):
        load_checkpoint(on_disk(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty: not a checkpoint directory"):
        load_checkpoint(on_disk(tmp_path / "empty"))


def test_failed_write_leaves_no_checkpoint(tmp_path, cfg, model, monkeypatch):
    target = tmp_path / "step-000000001"
    real_save = torch.save

    def failing_save(obj, path, *a, **k):
        if str(getattr(path, "name", path)).endswith("train_state.pt"):  # a path or a file object
            raise OSError("disk full")
        return real_save(obj, path, *a, **k)

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(on_disk(target), model, cfg, {"step": 1})
    assert list(tmp_path.iterdir()) == []  # neither the target nor a temporary directory


def test_replacing_a_checkpoint_is_complete(tmp_path, cfg, model):
    target = tmp_path / "ck"
    first = save_checkpoint(on_disk(target), model, cfg, {"step": 1})
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.5)
    second = save_checkpoint(on_disk(target), model, cfg, {"step": 2})
    assert first != second and load_checkpoint(on_disk(target)).model_id == second
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]


def test_truncated_garbage_and_wrong_shape_files_name_the_path(tmp_path, cfg, model):
    target = tmp_path / "ck"
    save_checkpoint(on_disk(target), model, cfg, {"step": 1})
    good = (target / "model.pt").read_bytes()

    (target / "model.pt").write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match=r"model\.pt: not a readable weights-only torch file"):
        load_checkpoint(on_disk(target))

    (target / "model.pt").write_bytes(b"\x00garbage" * 100)
    with pytest.raises(ValueError, match=r"model\.pt: not a readable"):
        load_checkpoint(on_disk(target))

    bigger = preset("tiny", SMALL[1:] + ["model.hidden=64"])
    torch.save(ArithmeticTransformer.for_experiment(bigger).state_dict(), target / "model.pt")
    with pytest.raises(ValueError, match=r"model\.pt: weights do not fit the configured model"):
        load_checkpoint(on_disk(target))

    (target / "model.pt").write_bytes(good)
    (target / "train_state.pt").write_bytes(b"not a zip")
    loaded = load_checkpoint(on_disk(target))  # the training state is only read when asked for
    with pytest.raises(ValueError, match=r"train_state\.pt: not a readable"):
        _ = loaded.state


class _Payload:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_refuses_pickles_that_are_not_weights_only(tmp_path, cfg, model):
    target = tmp_path / "ck"
    save_checkpoint(on_disk(target), model, cfg, {"step": 1})
    with open(target / "model.pt", "wb") as fh:
        pickle.dump({"x": _Payload()}, fh, protocol=2)
    with pytest.raises(ValueError, match=r"model\.pt: holds code that a weights-only load will not run"):
        load_checkpoint(on_disk(target))
    torch.save({"w": _Payload()}, target / "model.pt")  # a torch zip file with a code-running pickle
    with pytest.raises(ValueError, match=r"model\.pt: holds code that a weights-only load will not run"):
        load_checkpoint(on_disk(target))


def test_tampered_weights_fail_the_hash_check(tmp_path, cfg, model):
    target = tmp_path / "ck"
    save_checkpoint(on_disk(target), model, cfg, {"step": 1})
    weights = torch.load(target / "model.pt", weights_only=True)
    weights["decoder.weight"] = weights["decoder.weight"] + 1
    torch.save(weights, target / "model.pt")
    with pytest.raises(ValueError, match="does not match meta.json's model_id"):
        load_checkpoint(on_disk(target))


def test_weights_that_are_not_finite_are_never_written(tmp_path, cfg, model):
    """`save_checkpoint` (training, import) refuses NaN or infinite weights: nothing is written."""
    with torch.no_grad():
        model.decoder.weight[2, 3] = float("inf")
    with pytest.raises(ValueError, match=r"ck/model\.pt: decoder\.weight holds 1 NaN or infinite value"):
        save_checkpoint(on_disk(tmp_path / "ck"), model, cfg, {"step": 1})
    assert list(tmp_path.iterdir()) == []


def test_bad_config_json_names_the_file(tmp_path, cfg, model):
    target = tmp_path / "ck"
    save_checkpoint(on_disk(target), model, cfg, {"step": 1})
    (target / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"config\.json: not valid JSON"):
        load_checkpoint(on_disk(target))
    (target / "config.json").write_text(json.dumps({"model": {"layers": 0}}))
    with pytest.raises(ValueError, match=r"config\.json: invalid config \(model\.layers"):
        load_checkpoint(on_disk(target))
