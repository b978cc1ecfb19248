"""Checkpoints: an atomic directory of weights, config, training state and identity.

Layout of one checkpoint directory:
* `model.pt`        the model's state_dict (CPU tensors), loadable with
                    `torch.load(weights_only=True)`;
* `config.json`     the full resolved `ExperimentConfig` (enough to rebuild the model);
* `train_state.pt`  optimiser / grad-scaler state, counters (step, samples, data index, budget
                    spent) and RNG states, all as tensors, numbers and lists so it is weights-only
                    loadable;
* `meta.json`       `model_id` (sha256 of the weights' content) plus the scalar counters, for people
                    and for the results tables.

A training run writes numbered checkpoints `step-000001234/` into its checkpoint root and keeps the
newest few; `latest_checkpoint(root)` is the highest complete one. Writes go to a temporary sibling
directory that is renamed into place, so a reader never sees a half-written checkpoint. Loading
always uses `weights_only=True`: a checkpoint can never run code, and a truncated, garbage or
wrong-shape file is a `ValueError` naming the file (one that holds code, in the one wording of
`model/unsafe.py`); so are weights holding NaN or infinity, and weights whose hash is not
meta.json's `model_id`. Every loader (evaluation, resume) reads weights through `read_checked`,
which runs all of these checks, and `save_checkpoint` refuses to write weights that are not finite.

A checkpoint (or a run directory) may also be in an object store (`abacus_ray.storage`): its JSON
files are read in place, and `load_checkpoint` first copies the directory to a local cache
(`fetch`), then loads it exactly as a local one, weights-only. Every function here takes a resolved
`Location`: a user's argument is resolved at the command line, a checkpoint named in our own
records (a results row, `Source.checkpoint`, a trial's path) by `located`, once where it is read.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tempfile
import time
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from abacus_ray import storage
from abacus_ray.config import ExperimentConfig
from abacus_ray.model.transformer import ArithmeticTransformer
from abacus_ray.model.unsafe import code_it_names, unsafe_file
from abacus_ray.storage import Location
from abacus_ray.text import one_line

FORMAT_VERSION = 1
MODEL_FILE, CONFIG_FILE = "model.pt", "config.json"
STATE_FILE, META_FILE = "train_state.pt", "meta.json"
STEP_PREFIX = "step-"  # a numbered checkpoint's directory: step-000001500
_STEP_DIR = re.compile(rf"^{STEP_PREFIX}(\d+)$")
# Numbered checkpoints a run keeps (older ones are pruned): the training loop's, Ray Train's
# `CheckpointConfig` and `train --out` on object storage alike; `plan` prices them
KEPT_CHECKPOINTS = 2


def unwrap(model: nn.Module) -> nn.Module:
    """The plain model inside DDP (`.module`) and `torch.compile` (`._orig_mod`) wrappers."""
    while True:
        if isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod") and isinstance(model._orig_mod, nn.Module):
            model = model._orig_mod
        else:
            return model


def cpu_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The unwrapped model's state_dict as detached, contiguous CPU tensors."""
    return {k: v.detach().to("cpu").contiguous() for k, v in unwrap(model).state_dict().items()}


def content_hash(weights: dict[str, torch.Tensor]) -> str:
    """sha256 over (name, dtype, shape, bytes) of every tensor in name order: the model's
    identity."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        t = weights[name].detach().to("cpu").contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def model_id_of(model: nn.Module) -> str:
    return content_hash(cpu_weights(model))


def checkpoint_name(step: int) -> str:
    return f"{STEP_PREFIX}{step:09d}"


def is_checkpoint_name(name: str) -> bool:
    """Whether `name` is a numbered checkpoint's directory name (`checkpoint_name`)."""
    return _STEP_DIR.match(name) is not None


def located(text: str) -> Location:
    """A checkpoint as our own records hold it (a results row's `checkpoint`, `Source.checkpoint`,
    a trial's reported path: a local path or a URI) as a `Location`, parsed once where it is read.
    A user's argument is resolved at the command line instead (`storage.resolve` with its flag)."""
    return storage.resolve(text)


def list_checkpoints(root: Location) -> list[Location]:
    """Complete numbered checkpoints under `root` (local or in an object store), oldest first."""
    children = storage.listdir(root) if storage.is_dir(root) else []
    found = [(int(m.group(1)), c) for c in children
             if (m := _STEP_DIR.match(c.name)) and storage.is_file(c / META_FILE)]
    return [c for _, c in sorted(found, key=lambda t: t[0])]


def latest_checkpoint(root: Location) -> Location | None:
    found = list_checkpoints(root)
    return found[-1] if found else None


def resolve_checkpoint(loc: Location) -> Location:
    """`loc` itself if it is a checkpoint, else the latest checkpoint under it."""
    if storage.is_file(loc / META_FILE):
        return loc
    if not storage.exists(loc):
        raise FileNotFoundError(f"{loc}: no such checkpoint directory")
    latest = latest_checkpoint(loc)
    if latest is None and storage.exists(loc / META_FILE):  # a FIFO or a device under its name
        storage.check_regular_file(loc / META_FILE, storage.MAX_TEXT_BYTES)
    if latest is None:
        raise ValueError(f"{loc}: not a checkpoint directory and holds no step-* "
                         "checkpoints")
    return latest


def _json_scalars(state: dict[str, Any]) -> dict[str, Any]:
    """The state's scalars as JSON holds them: a float that is not finite (the loss of a window
    without a step) is written as null, never as the NaN JSON has not."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in state.items() if isinstance(v, (int, float, str, bool)) or v is None}


def save_checkpoint(directory: Location, model: nn.Module, cfg: ExperimentConfig,
                    state: dict) -> str:
    """Write a checkpoint directory atomically; returns the model id (sha256 of the weights).

    `state` is the training state (optimiser, counters, RNG states); it must be weights-only
    loadable (tensors, numbers, strings, lists, tuples, dicts). Its scalar entries are copied to
    meta.json.
    """
    weights = cpu_weights(model)
    # a diverged model is never written
    check_finite(weights, str(directory / MODEL_FILE))
    model_id = content_hash(weights)
    meta = {"format_version": FORMAT_VERSION, "model_id": model_id, "name": cfg.name,
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "torch": torch.__version__,
            # the CPU threads that summed this model's floats (training/threads.py)
            "threads": torch.get_num_threads(),
            "num_params": sum(t.numel() for t in unwrap(model).parameters())} | _json_scalars(state)

    # torch writes straight into the new directory: no second copy in memory; a full disk is an
    # OSError (errno), not torch's RuntimeError ("unexpected pos")
    def write(tmp: Path) -> None:
        for name, obj in ((MODEL_FILE, weights), (STATE_FILE, state)):
            storage.write_stream(tmp / name, lambda fh, obj=obj: torch.save(obj, fh))

    storage.write_dir(directory,
                      {CONFIG_FILE: json.dumps(cfg.to_dict(), indent=2, sort_keys=True),
                       META_FILE: json.dumps(meta, indent=2, sort_keys=True)},
                      fill=write, last=META_FILE)
    return model_id


def prune_checkpoints(root: Location, keep: int) -> None:
    """Delete all but the newest `keep` numbered checkpoints under `root`."""
    for old in list_checkpoints(root)[:-keep] if keep > 0 else []:
        storage.delete(old, quiet=True)


def load_weights_file(path: Path, map_location: Any = "cpu") -> Any:
    """`torch.load(path, weights_only=True)`, with any failure turned into a ValueError naming
    `path`: a file that holds code in the one wording of `model.unsafe` (torch's own message would
    advise the unsafe load), anything else as what it is. Torch's warnings about the file are not
    printed before that line."""
    path = Path(path)
    if not path.is_file():
        raise storage.not_a_file(path, "missing checkpoint file", "a checkpoint file")
    # no larger than the memory it would be read into
    storage.check_regular_file(storage.on_disk(path))
    try:
        with warnings.catch_warnings():
            # e.g. "Detected pickle protocol 3": the refusal below says more
            warnings.simplefilter("ignore")
            return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # truncated zip, garbage bytes, or a pickle that would run code
        code = code_it_names(path)
        if code is not None:
            raise ValueError(unsafe_file(path, code)) from None
        raise ValueError(f"{path}: not a readable weights-only torch file: "
                         f"{_what_it_is(path, e)}") from None


def _what_it_is(path: Path, e: Exception) -> str:
    """What a file that `torch.load(weights_only=True)` refused is, in words (torch's own messages
    name a byte (`KeyError: 101`), say `EOFError`, or advise loading with weights_only=False, which
    is never repeated here)."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(64)
    if size == 0:
        return "the file is empty (0 bytes)"
    if head.startswith(b"PK\x03\x04") and not zipfile.is_zipfile(path):
        return f"a truncated zip archive ({size:,} bytes, its end-of-archive directory is missing)"
    text = head.decode("utf-8", errors="replace")
    if "\ufffd" not in text and all(c.isprintable() or c in "\t\r\n" for c in text):
        return f"a text file ({size:,} bytes, starting {text.splitlines()[0][:40]!r})"
    # b"\x80": the pickle protocol marker of the legacy format
    if isinstance(e, EOFError) or head[:1] == b"\x80":
        return f"a truncated or corrupt pickle ({size:,} bytes)"
    if zipfile.is_zipfile(path):
        reason = one_line(str(e), 200)
        # never torch's advice to load unsafely
        told = "" if "weights" in reason.lower() else f": {reason}"
        return f"a damaged zip archive ({size:,} bytes{told})"
    return f"not a torch file ({size:,} bytes, starting {head[:8].hex(' ')})"


def read_json(loc: Location) -> dict:
    path = loc.as_path() if loc.local else loc  # as messages name it
    if not storage.is_file(loc):
        raise storage.not_a_file(path, "missing checkpoint file", "a checkpoint file")
    # an older meta.json may hold a NaN loss (a resumed finished run wrote one): read as null
    return storage.read_json(loc, str(path), nan_ok=("loss",) if loc.name == META_FILE else ())


def read_checkpoint_config(loc: Location) -> ExperimentConfig:
    """The `ExperimentConfig` stored beside a checkpoint's weights (no weights are read)."""
    config_path = loc / CONFIG_FILE
    try:
        return ExperimentConfig.from_dict(read_json(config_path))
    except ValueError as e:
        raise ValueError(f"{config_path}: invalid config ({e})") from None


# what a resume reads
RESUME_KEYS = ("optimizer", "step", "samples", "device_hours", "micro_index", "tokens")


def check_train_state(state: Any, where: Path) -> dict:
    """`state` if it holds what resuming reads (a weights-only file can still hold any dict)."""
    if not isinstance(state, dict):
        raise ValueError(f"{where}: expected a dict of training state")
    missing = [k for k in RESUME_KEYS if k not in state]
    if missing:
        raise ValueError(f"{where}: no {missing[0]!r} entry; not a training state this version "
                         "can resume")
    return state


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model in eval mode, its config, identity and (lazily) training
    state."""

    path: Path
    model: nn.Module
    config: ExperimentConfig
    model_id: str
    meta: dict
    map_location: Any = "cpu"
    source: str = ""  # where it was read from: the local path, or the URI of a fetched copy
    _state: dict | None = field(default=None, repr=False)

    @property
    def state(self) -> dict:
        """The training state (optimiser, counters, RNG); loaded on first access."""
        if self._state is None:
            self._state = load_weights_file(self.path / STATE_FILE, "cpu")
            if not isinstance(self._state, dict):
                raise ValueError(f"{self.path / STATE_FILE}: expected a dict of training state")
        return self._state


def check_weights_fit(weights: dict[str, torch.Tensor], cfg: ExperimentConfig, where: Path) -> None:
    """Refuse weights whose names or shapes differ from `cfg`'s model, before that model is
    allocated.

    A config.json from elsewhere may describe any model (hidden 65536, a million layers): the layer
    count is compared first, then the shapes of a meta-device model (no memory), so a mismatch costs
    nothing and a match allocates no more than the weights file already holds.
    """
    layers = {k.split(".")[1] for k in weights if k.startswith("layers.") and k.count(".") >= 2}
    if len(layers) != cfg.model.layers:
        raise ValueError(f"{where}: weights hold {len(layers)} layer(s) but config.json has "
                         f"model.layers={cfg.model.layers} (wrong architecture)")
    with torch.device("meta"):
        expected = {k: tuple(v.shape)
                    for k, v in ArithmeticTransformer.for_experiment(cfg).state_dict().items()}
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    wrong = sorted(k for k in set(expected) & set(weights)
                   if tuple(weights[k].shape) != expected[k])
    if missing or unexpected or wrong:
        what = (f"missing {missing[0]}" if missing
                else f"unexpected {unexpected[0]}" if unexpected
                else f"{wrong[0]} has shape {tuple(weights[wrong[0]].shape)}, "
                     f"the config needs {expected[wrong[0]]}")
        n = len(missing) + len(unexpected) + len(wrong)
        raise ValueError(f"{where}: weights do not fit the configured model ({what}; "
                         f"{n} tensor(s) differ)")


def check_finite(weights: dict[str, torch.Tensor], where: str) -> None:
    """Refuse weights holding NaN or infinity, naming the tensor by the file's key: such a model
    (diverged, or corrupted on its way) would be scored, and its zeros read as a result."""
    for name in sorted(weights):
        t = weights[name]
        if t.is_floating_point() or t.is_complex():
            bad = t.numel() - int(torch.isfinite(t).sum())
            if bad:
                raise ValueError(f"{where}: {name} holds {bad:,} NaN or infinite value(s) of "
                                 f"{t.numel():,} (diverged or corrupted weights)")


CACHE_DIR = "abacus-ray-checkpoints"  # under the temp dir: checkpoints fetched from object storage


def fetch(loc: Location) -> Path:
    """A local directory holding the checkpoint at `loc` (its latest under a run directory): `loc`
    itself on a local disk; from an object store, a copy in the node's temp dir, keyed by the URI
    and the weights' id (meta.json), made atomically (a temporary sibling renamed), and reused."""
    path = resolve_checkpoint(loc)
    if path.local:
        return path.as_path()
    meta = read_json(path / META_FILE)
    key = hashlib.sha256(f"{path.uri}|{meta.get('model_id')}".encode()).hexdigest()[:24]
    target = Path(tempfile.gettempdir()) / CACHE_DIR / f"{path.name}-{key}"
    if not (target / META_FILE).is_file():  # a copy made before (by any process) is reused
        storage.write_dir(storage.on_disk(target), fill=lambda tmp: storage.download(path, tmp),
                          replace=False)
    return target


def check_weights(weights: Any, cfg: ExperimentConfig, where: Path, model_id: str | None) -> str:
    """Every check weights pass before a model is built from them: a state_dict of tensors whose
    names and shapes fit `cfg`'s model, all finite, whose content hash equals `model_id`
    (meta.json's; None: not compared). Returns the content hash. Each refusal is one ValueError
    naming `where`."""
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor)
                                                for v in weights.values()):
        raise ValueError(f"{where}: expected a state_dict of tensors")
    check_weights_fit(weights, cfg, where)
    check_finite(weights, str(where))
    found = content_hash(weights)
    if model_id not in (None, found):
        raise ValueError(f"{where}: content hash {found[:12]} does not match meta.json's model_id "
                         f"{str(model_id)[:12]} (corrupted or replaced weights)")
    return found


@dataclass(frozen=True)
class CheckedWeights:
    """A checkpoint's weights as read by `read_checked`, with the config and meta.json beside
    them."""

    path: Path  # the local checkpoint directory (a fetched copy for a URI)
    config: ExperimentConfig
    meta: dict
    weights: dict[str, torch.Tensor]
    model_id: str


def read_checked(directory: Location) -> CheckedWeights:
    """The one way a checkpoint's weights are read, by every loader (evaluation, resume): the
    checkpoint (or the latest under `directory`; a URI is fetched here first), weights-only,
    through `check_weights`."""
    path = fetch(directory)
    cfg = read_checkpoint_config(storage.on_disk(path))
    meta = read_json(storage.on_disk(path / META_FILE))
    weights = load_weights_file(path / MODEL_FILE, "cpu")
    model_id = check_weights(weights, cfg, path / MODEL_FILE, meta.get("model_id"))
    return CheckedWeights(path, cfg, meta, weights, model_id)


def load_state(model: nn.Module, weights: dict[str, torch.Tensor], where: Path) -> None:
    """`model.load_state_dict(weights)`, a mismatch as one ValueError naming `where`."""
    try:
        model.load_state_dict(weights)
    except RuntimeError as e:
        first = one_line(str(e), 300)
        raise ValueError(f"{where}: weights do not fit the configured model ({first})") from None


def load_checkpoint(directory: Location, map_location: Any = "cpu") -> Checkpoint:
    """Rebuild the model of a checkpoint (or of the latest checkpoint under `directory`), which may
    be a URI (`fetch` copies it here first), after `read_checked`'s checks (the hash against
    meta.json's `model_id` catches silent corruption). `Checkpoint.source` is where it was read
    from (the URI for a remote one).
    """
    remote = resolve_checkpoint(directory)
    checked = read_checked(remote)
    model = ArithmeticTransformer.for_experiment(checked.config)
    load_state(model, checked.weights, checked.path / MODEL_FILE)
    model.to(map_location).eval()
    return Checkpoint(checked.path, model, checked.config, checked.model_id, checked.meta,
                      map_location, source=str(remote))
