"""Reading a checkpoint directory of the official code: its two files, bounded and checked, into
our config and weights (`abacus-ray import-official`); how each field and tensor maps is
model/official.py.

Every refusal is one ValueError or OSError naming the file by its path and the field or tensor by
the name the file gives it (`model_config.json`'s `hidden_size`, `encoder.head.dense_out.weight`),
before a model is built: a missing or oversized file, JSON that is not an object, a safetensors
file that is not one (a pickle under its name, which is never unpickled; one that would run code is
refused in the wording of model/unsafe.py), names and shapes that do not fit, and tensors holding
NaN or infinity.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from abacus_ray import storage
from abacus_ray.config import ExperimentConfig
from abacus_ray.model.checkpoint import check_finite
from abacus_ray.model.official import (
    MODEL_CONFIG,
    SAFETENSORS,
    check_layout,
    experiment_from_official,
    official_class,
    official_to_ours,
)
from abacus_ray.model.unsafe import code_it_names, unsafe_file
from abacus_ray.text import reason

MAX_CONFIG_BYTES = 1 << 20
# a paper model is ~0.5 GB; beyond the memory check, this stops absurd files
MAX_WEIGHTS_BYTES = 16 << 30


@dataclass(frozen=True)
class OfficialSource:
    """Where an imported model came from: recorded in its checkpoint's meta.json (`describe` shows
    it)."""

    path: str
    official_class: str
    config_sha256: str
    weights_sha256: str

    def meta(self) -> dict[str, str]:
        return {"imported_from": self.path, "imported_class": self.official_class,
                "imported_config_sha256": self.config_sha256,
                "imported_weights_sha256": self.weights_sha256}




def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_arch(directory: Path) -> dict:
    """The official `model_config.json` of a checkpoint directory (bounded in size, a JSON
    object)."""
    path = directory / MODEL_CONFIG
    if not path.is_file():
        raise storage.not_a_file(path, "missing (an official checkpoint directory holds "
                                       f"{SAFETENSORS} and {MODEL_CONFIG})",
                                 f"the {MODEL_CONFIG} file")
    try:
        # a regular file, bounded before it is read
        arch = json.loads(storage.read_text(storage.on_disk(path), MAX_CONFIG_BYTES))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"{path}: not valid JSON ({_first(e)})") from None
    if not isinstance(arch, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return arch


def _first(e: BaseException) -> str:
    return reason(e)


def _open_weights(path: Path):
    if not path.is_file():
        pickled = ([p.name for p in path.parent.glob("*.pth")]
                   + [p.name for p in path.parent.glob("*.bin")])
        hint = f"; {pickled[0]} is not read (a pickle: only safetensors are)" if pickled else ""
        raise storage.not_a_file(path, f"missing{hint}", f"the {SAFETENSORS} file")
    size = storage.check_regular_file(storage.on_disk(path), MAX_WEIGHTS_BYTES)
    if 2 * size > storage.memory_limit():  # read into memory, then copied into the model
        raise ValueError(f"{path}: {size:,} bytes of weights need about {2 * size:,} bytes of "
                         f"memory to import (read, then the model), more than this machine has "
                         f"free for it ({storage.memory_limit():,} bytes); not read")
    try:
        return safe_open(str(path), framework="pt", device="cpu")
    except (SafetensorError, OSError, ValueError) as e:
        code = code_it_names(path)  # a pickle under the safetensors name, which would run code
        if code is not None:
            raise ValueError(unsafe_file(path, code)) from None
        raise ValueError(f"{path}: not a safetensors file ({_first(e)}); "
                         "pickle checkpoints are not read") from None


def _in_files(e: ValueError, directory: Path) -> ValueError:
    """A refusal that names one of the two files by its bare name, naming it by its path instead."""
    text = str(e)
    for name in (MODEL_CONFIG, SAFETENSORS):
        if text.startswith(f"{name}: "):
            return ValueError(f"{directory / name}{text[len(name):]}")
    return e


def _tensors(path: Path, arch: dict,
             cfg: ExperimentConfig) -> tuple[dict[str, torch.Tensor], dict[str, str | None]]:
    """The file's tensors that map (names and shapes checked before any is read) and their names."""
    try:
        with _open_weights(path) as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
            names = check_layout(shapes, arch, cfg)
            return {k: f.get_tensor(k) for k in names}, names
    except SafetensorError as e:  # a header that promises more than the file holds
        raise ValueError(f"{path}: not a readable safetensors file ({_first(e)})") from None


def load_official(directory: str | Path, *, task: str | None = None,
                  train_max_len: int | None = None, name: str | None = None,
                  ) -> tuple[ExperimentConfig, dict[str, torch.Tensor], OfficialSource]:
    """(our config, our state dict, its source) for an official checkpoint directory.

    Everything is checked before a tensor is read: config, names, shapes; then buffers as they are
    read, and every tensor for NaN or infinity (named by the file's key).
    """
    directory = Path(directory)
    if not directory.is_dir():
        what = "is a file, not an" if directory.exists() else "no such"
        raise FileNotFoundError(f"{directory}: {what} official checkpoint directory "
                                f"(it holds {SAFETENSORS} and {MODEL_CONFIG})")
    arch = read_arch(directory)
    path = directory / SAFETENSORS
    try:
        cfg = experiment_from_official(arch, task=task, train_max_len=train_max_len,
                                       name=name or f"official-{directory.resolve().name}")
        tensors, names = _tensors(path, arch, cfg)
        check_finite(tensors, str(path))
        per_head = arch["attention"]["type"] == "self-attention"
        weights = official_to_ours(tensors, names, cfg, per_head)
    except ValueError as e:
        raise _in_files(e, directory) from None
    source = OfficialSource(str(directory.resolve()), official_class(arch),
                            _sha256(directory / MODEL_CONFIG), _sha256(path))
    return cfg, weights, source
