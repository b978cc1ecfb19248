"""Checkpoints of the official code (mcleish7/arithmetic) as abacus-ray models, and back.

The official `TorchEngine.save_final_model` writes a directory with `model.safetensors` (the state
dict) and `model_config.json` (the resolved `arch` config); docs/official-code.md §12 records what
those files hold (and §4 the model they describe). This module maps both onto ours:

* the config onto an `ExperimentConfig` (`experiment_from_official`): block size, recurrences,
  width, heads, positions, injection, Abacus k, initial state, vocabulary. The files do not name the
  task; the vocabulary size tells the tokenizer (19 `pad`, 121 `index`, 118 `sort`) and the caller
  names the task (addition by default);
* the weights onto our names (`official_to_ours`): `forward_only_model_with_skip` decides the
  official class and with it the key names (`encoder.recurrent_block._orig_mod.layers.{l}` without
  it, `encoder.recurrent_blocks.{l}._orig_mod.layers.0` with it); the official `self-attention`
  type (FIRE, RoPE) interleaves its fused projection per head, rows [q_h; k_h; v_h] for
  h = 0..heads-1, while ours (and torch's MultiheadAttention, the official `pytorch` type) is
  [Q; K; V]; the top-level `TransposedAdapter` stores the transpose of a Linear weight. Saved
  buffers (`norm_factor`, RoPE's `inv_freq`, the position tables' `position_ids`) are checked
  against what our model computes and dropped.

Anything that does not map (a config value we do not implement, an unexpected or missing tensor, a
shape) is a `ValueError` naming the key as the files spell it, raised before a tensor is read.
`official_state_dict` is the inverse mapping, used by the round-trip test and for handing a model
back to the official code. Plain torch; the files are read (safetensors only, no pickle) by
model/official_files.py.
"""

from __future__ import annotations

import math
import re
from typing import Any

import torch

from abacus_ray.config import ExperimentConfig, ModelConfig
from abacus_ray.config.evaluation import EvalConfig
from abacus_ray.config.task import TASKS, TaskConfig
from abacus_ray.model.layers import LN_EPS
from abacus_ray.model.rope import ROPE_BASE
from abacus_ray.model.transformer import ArithmeticTransformer
from abacus_ray.tasks.tokenizer import get_tokenizer

SAFETENSORS, MODEL_CONFIG = "model.safetensors", "model_config.json"
MODEL_TYPE = "ScriptableCrammedDepthRecurrent"
CLASS_SKIP, CLASS_PLAIN = "ScriptableRecurrentLMReplicaConcat", "ScriptableRecurrentLM"
# vocabulary size -> (tokenizer, index hints) of the official tokenizers (docs/official-code.md §1)
VOCABS = {19: ("pad", "none"), 121: ("index", "cyclic"), 118: ("sort", "none")}
GRIDS = {"add": ("paper-addition",), "sub": ("paper-subtraction",),
         "mul": ("paper-multiplication",), "addsub": ("paper-addition", "paper-subtraction"),
         "sort": ("paper-sorting",), "or": ("paper-or",)}
# What we implement of the official arch config; any other value is refused, naming its key.
REQUIRED_VALUES = {
    "input_injection_type": "add", "norm": "LayerNorm", "norm_scheme": "post", "nonlin": "GELUglu",
    "sub_normalization": False, "tie_weights": False, "decoder_bias": False, "use_bias": False,
    "final_norm": True, "head": "ffn", "embedding.normalization": True, "attention.qkv_bias": False,
    "attention.bias_in_proj": False, "attention.skip_output_projection": False,
    "attention.sequence_op": "torch-softmax",
}


def _get(arch: dict, dotted: str) -> Any:
    node: Any = arch
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ValueError(f"{MODEL_CONFIG}: no {dotted!r} field "
                             "(not an official depth-recurrent arch config)")
        node = node[part]
    return node


def _int(arch: dict, dotted: str, low: int = 1) -> int:
    v = _get(arch, dotted)
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{MODEL_CONFIG}: {dotted} must be an integer >= {low}, got {v!r}")
    return v


# Our config keys -> the fields of model_config.json (or the flags) they come from, for messages.
TYPED_AS = {"model.layers": "layers_in_recurrent_block", "model.recurrences": "maximal_recurrence",
            "model.eval_recurrences": "maximal_recurrence_in_eval", "model.hidden": "hidden_size",
            "model.intermediate": "intermed_size", "model.heads": "attention.num_attention_heads",
            "model.max_k": "embedding.max_abacus_len",
            "model.abacus_table": "embedding.max_seq_length",
            "model.fire_max_length": "attention.max_length",
            "task.train_max_len": "--train-max-len", "name": "--name"}


def as_typed(message: str) -> str:
    """A config refusal (`model.hidden: ... bound`) worded with the official field or flag a user
    wrote."""
    key, sep, rest = message.partition(": ")
    for ours, theirs in TYPED_AS.items():
        if "." in ours:  # dotted keys only: a bare word such as "name" may be plain prose
            rest = re.sub(rf"(?<![\w.]){re.escape(ours)}(?!\w)", theirs, rest)
    return f"{TYPED_AS.get(key, key)}{sep}{rest}"


def official_class(arch: dict) -> str:
    """The official encoder class the checkpoint was saved from (its key names depend on it)."""
    return CLASS_SKIP if arch.get("forward_only_model_with_skip") is True else CLASS_PLAIN


def positions_of(arch: dict) -> str:
    """Our `model.positions` for the official (pos_embedding, attention.type, rotary_embedding)."""
    pos, kind, rotary = _get(arch, "embedding.pos_embedding"), _get(arch, "attention.type"), \
        _get(arch, "attention.rotary_embedding")
    if pos not in ("abacus", "learned", "None", None):
        raise ValueError(f"{MODEL_CONFIG}: embedding.pos_embedding {pos!r} is not implemented here "
                         "(abacus, learned, None)")
    base = {"abacus": "abacus", "learned": "learned"}.get(pos, "nope")
    if kind == "pytorch":
        return base  # torch's MultiheadAttention ignores rotary_embedding
    if kind != "self-attention":
        raise ValueError(f"{MODEL_CONFIG}: attention.type {kind!r} is not implemented here "
                         "(pytorch, self-attention)")
    inner = "fire" if rotary == "fire" else "rope" if rotary is True else None
    if inner is None and rotary is not False:
        raise ValueError(f"{MODEL_CONFIG}: attention.rotary_embedding {rotary!r} is not "
                         "implemented here (fire, true, false)")
    if inner is None:
        return base
    if base == "learned":
        raise ValueError(f"{MODEL_CONFIG}: embedding.pos_embedding 'learned' with {inner} is not "
                         "implemented here")
    return inner if base == "nope" else f"abacus+{inner}"


def _initial_state(arch: dict) -> tuple[str, float]:
    if _get(arch, "initial_hidden_randomized") is not True:
        raise ValueError(f"{MODEL_CONFIG}: initial_hidden_randomized false (the state starts as "
                         "the embedding, which is then added again) is not implemented here")
    init = _get(arch, "state_init")
    if init == "embed":
        return "noise", 0.02
    if init == "normal":
        return "noise", 1.0
    if init == "zero":
        return "zeros", 0.02
    raise ValueError(f"{MODEL_CONFIG}: state_init {init!r} is not implemented here "
                     "(embed, normal, zero)")


def model_config_of(arch: dict) -> ModelConfig:
    """Our `ModelConfig` for an official arch config, or a ValueError naming the field we cannot
    map."""
    if MODEL_TYPE not in str(arch.get("model_type", "")):
        raise ValueError(f"{MODEL_CONFIG}: model_type {arch.get('model_type')!r} is not "
                         f"{MODEL_TYPE} (the only architecture of the paper's runs)")
    if _get(arch, "objective_layout") not in ("TBPTT", "deepthinking"):
        raise ValueError(f"{MODEL_CONFIG}: objective_layout {arch['objective_layout']!r} is not "
                         "implemented here (TBPTT, the paper's)")
    for key, want in REQUIRED_VALUES.items():
        got = _get(arch, key)
        if got != want:
            raise ValueError(f"{MODEL_CONFIG}: {key} {got!r} is not implemented here "
                             f"(only {want!r})")
    eps = _get(arch, "norm_eps")
    if not isinstance(eps, (int, float)) or not math.isclose(float(eps), LN_EPS, rel_tol=1e-6):
        raise ValueError(f"{MODEL_CONFIG}: norm_eps {eps!r} is not implemented here "
                         f"(only {LN_EPS})")
    hidden = _int(arch, "hidden_size")
    if _get(arch, "embedding.embedding_dim") != hidden:
        raise ValueError(f"{MODEL_CONFIG}: embedding.embedding_dim "
                         f"{arch['embedding']['embedding_dim']!r} differs from hidden_size "
                         f"{hidden} (an encoder adapter; not implemented here)")
    positions = positions_of(arch)
    init_state, init_std = _initial_state(arch)
    recurrences = _int(arch, "maximal_recurrence")
    eval_rec = arch.get("maximal_recurrence_in_eval", recurrences)
    table = (_int(arch, "embedding.max_seq_length")
             if positions.startswith("abacus") or positions == "learned" else 512)
    try:
        return ModelConfig(
            positions=positions, layers=_int(arch, "layers_in_recurrent_block"),
            recurrences=recurrences,
            injection="every" if official_class(arch) == CLASS_SKIP else "first", hidden=hidden,
            intermediate=_int(arch, "intermed_size"),
            heads=_int(arch, "attention.num_attention_heads"),
            max_k=(_int(arch, "embedding.max_abacus_len", 0)
                   if positions.startswith("abacus") else 0),
            abacus_table=table, init_state=init_state, init_std=init_std,
            fire_max_length=(_int(arch, "attention.max_length", 0)
                             if arch["attention"].get("max_length") else 0),
            eval_recurrences=None if eval_rec in (None, recurrences) else eval_rec)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{MODEL_CONFIG}: {as_typed(str(e))}") from None


def experiment_from_official(arch: dict, *, task: str | None = None,
                             train_max_len: int | None = None,
                             name: str = "official") -> ExperimentConfig:
    """The `ExperimentConfig` of an official checkpoint: its model, the task its vocabulary implies
    (`task` overrides within that vocabulary; addition by default), that task's paper grids."""
    model = model_config_of(arch)
    vocab = _int(arch, "embedding.vocab_size")
    if vocab not in VOCABS:
        raise ValueError(f"{MODEL_CONFIG}: embedding.vocab_size {vocab} is none of the official "
                         f"tokenizers' ({', '.join(f'{n} {t}' for n, (t, _) in VOCABS.items())})")
    tokenizer, hints = VOCABS[vocab]
    task = task or ("sort" if tokenizer == "sort" else "add")
    if task not in TASKS:
        raise ValueError(f"--task: {task!r} is not one of {', '.join(TASKS)}")
    if ((task == "sort") != (tokenizer == "sort")
            or (hints != "none" and task not in ("add", "sub"))):
        raise ValueError(f"--task: {task} does not fit embedding.vocab_size {vocab} "
                         f"(the {tokenizer!r} tokenizer)")
    n = train_max_len or (10 if task == "sort" else 20)
    try:
        task_cfg = TaskConfig(name=task, train_max_len=n, index_hints=hints)
        cfg = ExperimentConfig(name=name, task=task_cfg, model=model,
                               eval=EvalConfig(grids=GRIDS[task]))
    except ValueError as e:
        text = as_typed(str(e))
        raise ValueError(text if text.startswith("--") else f"{MODEL_CONFIG}: {text}") from None
    assert get_tokenizer(cfg.task.tokenizer_name).vocab_size == vocab
    return cfg


# ------------------------------------------------------------------------------------------ weights

_COMPILED = re.compile(r"\._orig_mod(?=\.)")


def _layer_prefix(key: str, skip: bool) -> tuple[int, str] | None:
    """(layer, rest) of an official block key, `._orig_mod` (torch.compile's wrapper) removed."""
    key = _COMPILED.sub("", key)
    m = (re.fullmatch(r"encoder\.recurrent_blocks\.(\d+)\.layers\.0\.(.+)", key) if skip
         else re.fullmatch(r"encoder\.recurrent_block\.layers\.(\d+)\.(.+)", key))
    return (int(m.group(1)), m.group(2)) if m else None


def _top_name(positions: str) -> dict[str, str]:
    names = {"encoder.embedding.word_embedding.weight": "tok.weight",
             "encoder.embedding.norm.weight": "emb_norm.weight",
             "encoder.embedding.norm.bias": "emb_norm.bias",
             "encoder.head.dense_in.weight": "head.w_in.weight",
             "encoder.head.dense_out.weight": "head.w_out.weight",
             "encoder.final_norm.weight": "final_norm.weight",
             "encoder.final_norm.bias": "final_norm.bias",
             "adapter.weight": "adapter.weight", "decoder.weight": "decoder.weight"}
    if positions.startswith("abacus"):
        names["encoder.embedding.pos_embedding.embedding.weight"] = "abacus.table.weight"
    elif positions == "learned":
        names["encoder.embedding.pos_embedding.embedding.weight"] = "learned.table.weight"
    return names


def _layer_name(rest: str, seq_first: bool) -> str | None:
    """Our per-layer name for an official per-layer key (None for a buffer we check and drop)."""
    fixed = {"residual1.norm.weight": "norm1.weight", "residual1.norm.bias": "norm1.bias",
             "residual2.norm.weight": "norm2.weight", "residual2.norm.bias": "norm2.bias",
             "ffn.dense_in.weight": "ffn.w_in.weight", "ffn.dense_out.weight": "ffn.w_out.weight"}
    if seq_first:
        fixed |= {"attn.in_proj_weight": "attn.qkv.weight",
                  "attn.out_proj.weight": "attn.out.weight",
                  "attn.rotary_emb.c": "attn.fire.c", "attn.rotary_emb.init_L": "attn.fire.L0",
                  "attn.rotary_emb.L_multiplier": "attn.fire.L_mult"}
        m = re.fullmatch(r"attn\.rotary_emb\.mlp\.(\d+)\.(weight|bias)", rest)
        if m:
            return f"attn.fire.mlp.{m.group(1)}.{m.group(2)}"
    else:
        fixed |= {"attn.attn.in_proj_weight": "attn.qkv.weight",
                  "attn.attn.out_proj.weight": "attn.out.weight"}
    return fixed.get(rest)


DROPPED_BUFFERS = ("attn.norm_factor", "attn.rotary_emb.inv_freq")
POSITION_IDS = "encoder.embedding.pos_embedding.position_ids"


def map_names(keys: list[str], arch: dict, cfg: ExperimentConfig) -> dict[str, str | None]:
    """official key -> our key (None: a buffer checked and dropped); a key that maps to nothing
    raises."""
    skip = official_class(arch) == CLASS_SKIP
    seq_first = _get(arch, "attention.type") == "self-attention"
    top = _top_name(cfg.model.positions)
    out: dict[str, str | None] = {}
    for key in keys:
        if key in top:
            out[key] = top[key]
            continue
        if key == POSITION_IDS and (cfg.model.uses_abacus or cfg.model.positions == "learned"):
            out[key] = None
            continue
        found = _layer_prefix(key, skip)
        if found is not None:
            layer, rest = found
            if rest in DROPPED_BUFFERS and seq_first:
                out[key] = None
                continue
            ours = _layer_name(rest, seq_first)
            if ours is not None and layer < cfg.model.layers:
                out[key] = f"layers.{layer}.{ours}"
                continue
        raise ValueError(f"{SAFETENSORS}: unexpected tensor {key!r} (no place for it in a "
                         f"{official_class(arch)} with positions {cfg.model.positions})")
    return out


def deinterleave_qkv(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Official per-head rows [q_0 k_0 v_0 | q_1 k_1 v_1 | ...] -> ours [Q; K; V]."""
    three_h, hidden = w.shape
    return (w.reshape(heads, 3, three_h // (3 * heads), hidden).transpose(0, 1)
            .reshape(three_h, hidden))


def interleave_qkv(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Ours [Q; K; V] -> the official per-head interleaved rows (the inverse of
    `deinterleave_qkv`)."""
    three_h, hidden = w.shape
    return (w.reshape(3, heads, three_h // (3 * heads), hidden).transpose(0, 1)
            .reshape(three_h, hidden))


def _check_buffer(key: str, value: torch.Tensor, cfg: ExperimentConfig) -> None:
    """A saved buffer must equal what our model computes itself, or the import would change the
    model."""
    m = cfg.model
    head_dim = m.hidden // m.heads
    if key.endswith("norm_factor"):
        want = torch.tensor(head_dim ** -0.5)
    elif key.endswith("inv_freq"):
        want = 1.0 / ROPE_BASE ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    else:  # position_ids
        want = torch.arange(value.shape[-1]).expand(1, -1)
        if value.dtype.is_floating_point or value.shape[-1] != m.abacus_table:
            raise ValueError(f"{SAFETENSORS}: {key} has shape {tuple(value.shape)}, "
                             f"expected (1, {m.abacus_table})")
    if value.shape != want.shape or not torch.allclose(value.double(), want.double(), rtol=1e-5,
                                                       atol=0):
        raise ValueError(f"{SAFETENSORS}: buffer {key} differs from what the model computes "
                         f"(shape {tuple(value.shape)}); not a checkpoint of the standard code")


def expected_shapes(cfg: ExperimentConfig) -> dict[str, tuple[int, ...]]:
    """Our model's tensor shapes for `cfg`, from a meta-device model (no memory)."""
    with torch.device("meta"):
        return {k: tuple(v.shape)
                for k, v in ArithmeticTransformer.for_experiment(cfg).state_dict().items()}


def check_layout(shapes: dict[str, tuple[int, ...]], arch: dict,
                 cfg: ExperimentConfig) -> dict[str, str | None]:
    """Names and shapes of the official file against the config's model, before any tensor is
    read."""
    skip = official_class(arch) == CLASS_SKIP
    held = {found[0] for k in shapes if (found := _layer_prefix(k, skip)) is not None}
    if len(held) != cfg.model.layers:  # before a model of the config's size is even described
        raise ValueError(f"{SAFETENSORS}: holds {len(held)} layer(s) of a "
                         f"{official_class(arch)}, but {MODEL_CONFIG} has "
                         f"layers_in_recurrent_block={cfg.model.layers}")
    names = map_names(sorted(shapes), arch, cfg)
    want = expected_shapes(cfg)
    got = {ours: key for key, ours in names.items() if ours is not None}
    missing = sorted(set(want) - set(got))
    if missing:
        compiled = any(_COMPILED.search(k) for k in shapes)
        seq_first = _get(arch, "attention.type") == "self-attention"
        key = official_name(missing[0], cfg, seq_first=seq_first, skip=skip, compiled=compiled)
        raise ValueError(f"{SAFETENSORS}: no tensor {key} ({len(missing)} missing; the config "
                         f"describes a {cfg.model.layers}-layer {official_class(arch)} with "
                         f"{cfg.model.positions})")
    extra = sorted(key for ours, key in got.items() if ours not in want)
    if extra:  # e.g. FIRE's tensors in a file whose config asks for RoPE
        raise ValueError(f"{SAFETENSORS}: unexpected tensor {extra[0]!r} (no place for it in a "
                         f"{official_class(arch)} with positions {cfg.model.positions})")
    for ours, key in sorted(got.items()):
        shape = tuple(reversed(shapes[key])) if ours == "adapter.weight" else shapes[key]
        if shape != want[ours]:
            raise ValueError(f"{SAFETENSORS}: {key} has shape {tuple(shapes[key])}, the config "
                             f"needs {want[ours]}")
    return names


def official_to_ours(tensors: dict[str, torch.Tensor], names: dict[str, str | None],
                     cfg: ExperimentConfig, seq_first: bool) -> dict[str, torch.Tensor]:
    """Our state dict from the official tensors (names from `check_layout`); buffers are checked,
    then dropped."""
    out = {}
    for key, ours in names.items():
        t = tensors[key]
        if ours is None:
            _check_buffer(key, t, cfg)
            continue
        if not t.dtype.is_floating_point:
            raise ValueError(f"{SAFETENSORS}: {key} has dtype {t.dtype}, "
                             "expected floating point weights")
        t = t.to(torch.float32)
        if ours == "adapter.weight":
            t = t.t()  # TransposedAdapter computes x @ W; our Linear computes x @ A.T
        elif ours.endswith("attn.qkv.weight") and seq_first:
            t = deinterleave_qkv(t, cfg.model.heads)
        out[ours] = t.contiguous()
    return out


def official_name(ours: str, cfg: ExperimentConfig, *, seq_first: bool, skip: bool,
                  compiled: bool = True) -> str:
    """The official file's key for our tensor `ours` (the inverse of `map_names`)."""
    top = {o: key for key, o in _top_name(cfg.model.positions).items()}
    if ours in top:
        return top[ours]
    layer, rest = re.fullmatch(r"layers\.(\d+)\.(.+)", ours).groups()
    official = next(r for r in _layer_keys(seq_first) if _layer_name(r, seq_first) == rest)
    return _block_prefix(int(layer), skip, compiled) + official


def _block_prefix(layer: int, skip: bool, compiled: bool) -> str:
    wrap = "._orig_mod" if compiled else ""
    if skip:
        return f"encoder.recurrent_blocks.{layer}{wrap}.layers.0."
    return f"encoder.recurrent_block{wrap}.layers.{layer}."


def official_state_dict(weights: dict[str, torch.Tensor], cfg: ExperimentConfig, *,
                        seq_first: bool, skip: bool,
                        compiled: bool = True) -> dict[str, torch.Tensor]:
    """Our state dict in the official layout (the inverse of `official_to_ours`, buffers
    included)."""
    m = cfg.model
    out: dict[str, torch.Tensor] = {}
    for ours, t in weights.items():
        if ours == "adapter.weight":
            t = t.t().contiguous()
        elif ours.endswith("attn.qkv.weight") and seq_first:
            t = interleave_qkv(t, m.heads)
        name = official_name(ours, cfg, seq_first=seq_first, skip=skip, compiled=compiled)
        out[name] = t.contiguous()
    head_dim = m.hidden // m.heads
    for layer in range(m.layers):
        prefix = _block_prefix(layer, skip, compiled)
        if seq_first:
            out[prefix + "attn.norm_factor"] = torch.tensor(head_dim ** -0.5)
            if m.positions in ("rope", "abacus+rope"):
                even = torch.arange(0, head_dim, 2, dtype=torch.float32)
                out[prefix + "attn.rotary_emb.inv_freq"] = 1.0 / ROPE_BASE ** (even / head_dim)
    if m.uses_abacus or m.positions == "learned":
        out[POSITION_IDS] = torch.arange(m.abacus_table).expand(1, -1).contiguous()
    return out


def _layer_keys(seq_first: bool) -> list[str]:
    keys = ["residual1.norm.weight", "residual1.norm.bias", "residual2.norm.weight",
            "residual2.norm.bias", "ffn.dense_in.weight", "ffn.dense_out.weight"]
    if not seq_first:
        return keys + ["attn.attn.in_proj_weight", "attn.attn.out_proj.weight"]
    return keys + ["attn.in_proj_weight", "attn.out_proj.weight", "attn.rotary_emb.c",
                   "attn.rotary_emb.init_L", "attn.rotary_emb.L_multiplier"] + [
        f"attn.rotary_emb.mlp.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")]
