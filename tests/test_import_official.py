"""`import-official`: checkpoints of the official code (mcleish7/arithmetic) as our models.

The official code cannot run here (hydra, transformers, a GPU build), so the fixtures are built from
what its files contain, read from its source at commit 86022a5 (docs/official-code.md):

* `model_config.json`: the fields of `cramming/config/arch/crammed-depthrecurrent.yaml` as
  `OmegaConf.to_container(cfg.arch, resolve=True)` writes them (`TorchEngine.save_final_model`,
  `cramming/backend/torch_default.py`), with the addition shells' overrides (positions, heads,
  `state_init`, `forward_only_model_with_skip`) and `embedding.vocab_size` filled in as
  `construct_crammed_recurrent` does; `pos_embedding` is the string "None" for NoPE.
* `model.safetensors`: one tensor per entry of the official `state_dict`, with the names and shapes
  its modules give them: `ScriptableRecurrentLMBPTT` (encoder, `TransposedAdapter` `adapter.weight`
  [hidden, embedding_dim], `decoder.weight`), `ScriptableRecurrentLM` / `...ReplicaConcat` (the
  `torch.compile` wrapper's `._orig_mod.`), `TransformerLayer` (`residual{1,2}.norm`, `ffn.dense_in`
  [intermed, hidden], `ffn.dense_out` [hidden, intermed/2]), `SelfAttentionPyTorch`
  (`attn.attn.in_proj_weight`, `attn.attn.out_proj.weight`), `SeqFirstSelfAttention`
  (`attn.in_proj_weight`, `attn.out_proj.weight`, buffer `attn.norm_factor`), `Rotary`
  (`rotary_emb.inv_freq`), `FIRE` (`rotary_emb.mlp.{0,2}`, `c`, `init_L`, `L_multiplier`), `Abacus`
  (`pos_embedding.embedding.weight`, buffer `position_ids`), `EmbeddingComponent` (`word_embedding`,
  `norm`). Values are random (not a trained model): equivalence must hold for any weights.

`reference_logits` is an independent forward over those official-layout tensors, written from the
official source's math, not from ours: the per-head split of the fused projection
(`SeqFirstSelfAttention.forward`: view [S, B, heads, 3*head_dim], split q | k | v), scores scaled by the
`norm_factor` buffer plus the FIRE bias, masked with -10000 (`TorchSoftmax`); torch's own
`nn.MultiheadAttention` for the `pytorch` type (what `SelfAttentionPyTorch` calls); the Rotary tables
from the saved `inv_freq` with rotate-half; FIRE from `embeddings.FIRE.forward`; Abacus positions by a
plain loop (`Abacus.helper`); post-LN residuals eps 1e-12 (`NormalizedResidualConnection`); the GLU
(`components.GLU`: gelu(gate) * x of the two halves); injection per class (`TransformerBlock.forward`
adds the embedding before its layers: once per recurrence in `ScriptableRecurrentLM`, before every
single-layer block in `ScriptableRecurrentLMReplicaConcat`); head FFN, final norm, the transposed
adapter (`linear(x, W.T)`), decoder. The initial-state noise is off on both sides (`state_init: zero`,
ours `init_state: zeros`), so the two forwards must agree to float tolerance.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from refusal import FUZZ, run, tally
from safetensors.torch import save_file

from abacus_ray.cli import main
from abacus_ray.config import preset
from abacus_ray.model.checkpoint import load_checkpoint, read_json
from abacus_ray.model.official import official_state_dict
from abacus_ray.model.transformer import ArithmeticTransformer
from abacus_ray.storage import on_disk
from abacus_ray.tasks.tokenizer import get_tokenizer

H, HEADS, INTERMED, VOCAB, TABLE, K = 64, 4, 128, 19, 64, 10
POSITIONS = {  # ours -> official (pos_embedding, attention.type, rotary_embedding)
    "abacus": ("abacus", "pytorch", False),
    "nope": ("None", "pytorch", False),
    "fire": ("None", "self-attention", "fire"),
    "rope": ("None", "self-attention", True),
    "abacus+fire": ("abacus", "self-attention", "fire"),
}
ARCHS = {"standard": (2, 1, False), "looped": (2, 2, True)}  # layers, recurrences, forward_only_model_with_skip


def official_arch(positions: str, layers: int, recurrences: int, skip: bool) -> dict:
    pos, kind, rotary = POSITIONS[positions]
    return {
        "model_type": "ScriptableCrammedDepthRecurrent", "layers_in_recurrent_block": layers,
        "maximal_recurrence": recurrences, "max_backprop": None, "maximal_recurrence_in_eval": recurrences,
        "hidden_size": H, "intermed_size": INTERMED, "input_injection_type": "add",
        "initial_hidden_randomized": True, "state_init": "zero", "norm": "LayerNorm", "norm_eps": 1e-12,
        "norm_scheme": "post", "nonlin": "GELUglu", "sub_normalization": False, "tie_weights": False,
        "decoder_bias": False, "use_bias": False, "final_norm": True, "head": "ffn", "objective_layout": "TBPTT",
        "embedding": {"vocab_size": VOCAB, "pos_embedding": pos, "max_seq_length": TABLE, "embedding_dim": H,
                      "normalization": True, "stable_low_precision": False, "max_abacus_len": K},
        "attention": {"type": kind, "num_attention_heads": HEADS, "skip_output_projection": False,
                      "qkv_bias": False, "bias_in_proj": False, "max_length": 0, "rotary_embedding": rotary,
                      "seq_op_in_fp32": False, "sequence_op": "torch-softmax", "sub_normalization": False},
        "init": {"type": "deepnorm-straight", "std": 0.02}, "throttle": False, "alpha": 1.0,
        "mask_before_equals": True, "local_compilation": True, "loss_reduction": "mean",
        "forward_only_model_with_skip": skip,
    }


def _layer_prefix(arch: dict, layer: int) -> str:
    if arch["forward_only_model_with_skip"]:
        return f"encoder.recurrent_blocks.{layer}._orig_mod.layers.0."
    return f"encoder.recurrent_block._orig_mod.layers.{layer}."


def official_tensors(arch: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random tensors under the official state_dict's names and shapes (see the module docstring)."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, std=0.2, mean=0.0):
        return (mean + std * torch.randn(*shape, generator=g)).contiguous()

    t = {"encoder.embedding.word_embedding.weight": rnd(VOCAB, H, std=0.5),
         "encoder.embedding.norm.weight": rnd(H, mean=1.0, std=0.1), "encoder.embedding.norm.bias": rnd(H, std=0.1),
         "encoder.head.dense_in.weight": rnd(INTERMED, H), "encoder.head.dense_out.weight": rnd(H, INTERMED // 2),
         "encoder.final_norm.weight": rnd(H, mean=1.0, std=0.1), "encoder.final_norm.bias": rnd(H, std=0.1),
         "adapter.weight": rnd(H, H), "decoder.weight": rnd(VOCAB, H)}
    if arch["embedding"]["pos_embedding"] == "abacus":
        t["encoder.embedding.pos_embedding.embedding.weight"] = rnd(TABLE, H, std=0.5)
        t["encoder.embedding.pos_embedding.position_ids"] = torch.arange(TABLE).expand(1, -1).contiguous()
    seq_first = arch["attention"]["type"] == "self-attention"
    hd = H // HEADS
    for layer in range(arch["layers_in_recurrent_block"]):
        p = _layer_prefix(arch, layer)
        t |= {p + "residual1.norm.weight": rnd(H, mean=1.0, std=0.1), p + "residual1.norm.bias": rnd(H, std=0.1),
              p + "residual2.norm.weight": rnd(H, mean=1.0, std=0.1), p + "residual2.norm.bias": rnd(H, std=0.1),
              p + "ffn.dense_in.weight": rnd(INTERMED, H), p + "ffn.dense_out.weight": rnd(H, INTERMED // 2)}
        a = p + ("attn." if seq_first else "attn.attn.")
        t |= {a + "in_proj_weight": rnd(3 * H, H, std=0.3), a + "out_proj.weight": rnd(H, H)}
        if seq_first:
            t[p + "attn.norm_factor"] = torch.tensor(hd).rsqrt()
            rotary = arch["attention"]["rotary_embedding"]
            if rotary is True:
                t[p + "attn.rotary_emb.inv_freq"] = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
            elif rotary == "fire":
                r = p + "attn.rotary_emb."
                t |= {r + "mlp.0.weight": rnd(32, 1, std=1.0), r + "mlp.0.bias": rnd(32, std=0.5),
                      r + "mlp.2.weight": rnd(HEADS, 32, std=0.5), r + "mlp.2.bias": rnd(HEADS, std=0.5),
                      r + "c": torch.tensor(0.1 + 0.05 * seed), r + "init_L": torch.tensor(512.0),
                      r + "L_multiplier": torch.tensor(1.0)}
    return t


# ------------------------------------------------------------------ the independent reference forward

def _ln(x, t, name):
    return F.layer_norm(x, (x.shape[-1],), t[name + ".weight"], t[name + ".bias"], eps=1e-12)


def _ffn(x, w_in, w_out):
    value, gate = (x @ w_in.T).chunk(2, dim=-1)
    return (F.gelu(gate) * value) @ w_out.T


def _abacus_ids(ids: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(ids)
    for b in range(ids.shape[0]):
        run = 0
        for s in range(ids.shape[1]):
            run = run + 1 if 4 <= int(ids[b, s]) <= 13 else 0
            out[b, s] = run
    return out


def _fire_bias(t, r, s):
    pos = torch.arange(s, dtype=torch.float32)
    rel = torch.log(torch.abs(t[r + "c"] * (pos[:, None] - pos[None, :])) + 1)
    norm = torch.log(torch.abs(t[r + "c"] * torch.max(pos, torch.abs(t[r + "L_multiplier"] * t[r + "init_L"]))[:, None]) + 1)
    x = (rel / (norm + 1e-6)).unsqueeze(-1)
    x = F.relu(x @ t[r + "mlp.0.weight"].T + t[r + "mlp.0.bias"]) @ t[r + "mlp.2.weight"].T + t[r + "mlp.2.bias"]
    return x.permute(2, 0, 1)  # [heads, S, S]


def _seq_first_attention(x, t, p, arch):
    b, s, _ = x.shape
    hd = H // HEADS
    mixed = (x @ t[p + "attn.in_proj_weight"].T).view(b, s, HEADS, 3 * hd)
    q, k, v = (z.permute(0, 2, 1, 3) for z in torch.split(mixed, hd, dim=3))  # [B, heads, S, hd]
    rotary = arch["attention"]["rotary_embedding"]
    if rotary is True:
        freqs = torch.arange(s).float()[:, None] * t[p + "attn.rotary_emb.inv_freq"][None, :]
        emb = torch.cat((freqs, freqs), dim=-1)

        def rot(z):
            return torch.cat((-z[..., hd // 2:], z[..., :hd // 2]), dim=-1)
        q, k = q * emb.cos() + rot(q) * emb.sin(), k * emb.cos() + rot(k) * emb.sin()
    scores = (q @ k.transpose(-1, -2)) * t[p + "attn.norm_factor"]
    if rotary == "fire":
        scores = scores + _fire_bias(t, p + "attn.rotary_emb.", s)
    scores = scores.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool), 1), -10000.0)
    ctx = torch.softmax(scores, dim=-1) @ v
    return ctx.permute(0, 2, 1, 3).reshape(b, s, H) @ t[p + "attn.out_proj.weight"].T


def _pytorch_attention(x, t, p):
    mha = torch.nn.MultiheadAttention(H, HEADS, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(t[p + "attn.attn.in_proj_weight"])
        mha.out_proj.weight.copy_(t[p + "attn.attn.out_proj.weight"])
    s = x.shape[1]
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
    return mha(x, x, x, attn_mask=mask, need_weights=False, is_causal=True)[0]


@torch.no_grad()
def reference_logits(arch: dict, t: dict[str, torch.Tensor], ids: torch.Tensor) -> torch.Tensor:
    """The official model's noise-off logits, from the official source's math over its own tensors."""
    e = t["encoder.embedding.word_embedding.weight"][ids]
    if arch["embedding"]["pos_embedding"] == "abacus":
        e = e + t["encoder.embedding.pos_embedding.embedding.weight"][_abacus_ids(ids)]
    e = _ln(e, t, "encoder.embedding.norm")
    seq_first = arch["attention"]["type"] == "self-attention"
    layers = range(arch["layers_in_recurrent_block"])

    def layer(x, p):
        a = _seq_first_attention(x, t, p, arch) if seq_first else _pytorch_attention(x, t, p)
        x = _ln(x + a, t, p + "residual1.norm")
        return _ln(x + _ffn(x, t[p + "ffn.dense_in.weight"], t[p + "ffn.dense_out.weight"]), t, p + "residual2.norm")

    state = torch.zeros_like(e)  # state_init "zero"
    for _ in range(arch["maximal_recurrence"]):
        if arch["forward_only_model_with_skip"]:  # one single-layer TransformerBlock per layer
            for n in layers:
                state = layer(state + e, _layer_prefix(arch, n))
        else:  # one TransformerBlock of all layers
            state = state + e
            for n in layers:
                state = layer(state, _layer_prefix(arch, n))
    out = _ln(_ffn(state, t["encoder.head.dense_in.weight"], t["encoder.head.dense_out.weight"]), t, "encoder.final_norm")
    return (out @ t["adapter.weight"]) @ t["decoder.weight"].T  # TransposedAdapter: linear(x, W.T)


# ------------------------------------------------------------------ helpers

def write_official(directory, arch, tensors):
    directory.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "model_config.json").write_text(json.dumps(arch))
    return directory


def problem_ids(n: int = 6, seed: int = 0) -> torch.Tensor:
    """Reversed addition lines (prompt + answer + EOS), equal length, as the models read them."""
    import random

    rng = random.Random(seed)
    tok = get_tokenizer("pad")
    rows = []
    for _ in range(n):
        a, b = rng.randrange(10**6, 10**7), rng.randrange(10**6, 10**7)
        line = f"{str(a)[::-1]}+{str(b)[::-1]}={str(a + b)[::-1]}"
        rows.append(tok.encode(line, eos=True))
    width = max(map(len, rows))
    return torch.tensor([r + [0] * (width - len(r)) for r in rows])


def import_cli(src, out, *extra) -> int:
    return main(["import-official", str(src), "--out", str(out), *extra])


# ------------------------------------------------------------------ tests

TOLERANCE = 2e-4  # float32; measured max |difference| is printed per case


@pytest.mark.parametrize("arch_name", sorted(ARCHS))
@pytest.mark.parametrize("positions", sorted(POSITIONS))
def test_imported_logits_equal_official_reference(tmp_path, positions, arch_name, capsys):
    arch = official_arch(positions, *ARCHS[arch_name])
    tensors = official_tensors(arch, seed=1)
    assert import_cli(write_official(tmp_path / "official", arch, tensors), tmp_path / "ours") == 0
    ckpt = load_checkpoint(on_disk(tmp_path / "ours"))
    m = ckpt.config.model
    assert (m.positions, m.layers, m.recurrences, m.init_state) == (positions, *ARCHS[arch_name][:2], "zeros")
    assert m.injection == ("every" if ARCHS[arch_name][2] else "first")
    ids = problem_ids()
    with torch.no_grad():
        ours = ckpt.model(ids)
    want = reference_logits(arch, tensors, ids)
    diff = (ours - want).abs().max().item()
    scale = want.abs().max().item()
    with capsys.disabled():
        print(f"\n  {positions:12s} {arch_name:8s}: max |ours - official reference| = {diff:.2e} (logits up to {scale:.1f})")
    assert diff < TOLERANCE * max(1.0, scale), diff
    assert torch.equal(ours.argmax(-1), want.argmax(-1))


def test_interleaved_heads_matter(tmp_path):
    """The per-head [q_h; k_h; v_h] rows are what the reference splits; read as [Q; K; V] they give
    different logits (the trap that leaves an imported FIRE model at 0 %)."""
    arch = official_arch("fire", 2, 1, False)
    tensors = official_tensors(arch, seed=2)
    want = reference_logits(arch, tensors, problem_ids())
    import_cli(write_official(tmp_path / "o", arch, tensors), tmp_path / "ours")
    model = load_checkpoint(on_disk(tmp_path / "ours")).model
    for layer in range(2):  # undo our de-interleaving: now the model reads the official rows as [Q; K; V]
        prefix = _layer_prefix(arch, layer)
        with torch.no_grad():
            model.layers[layer].attn.qkv.weight.copy_(tensors[prefix + "attn.in_proj_weight"])
    with torch.no_grad():
        assert (model(problem_ids()) - want).abs().max() > 1e-2


@pytest.mark.parametrize("positions", ["abacus+fire", "rope"])
def test_round_trip_ours_to_official_to_ours(tmp_path, positions):
    """Our model -> the official layout -> import: identical weights, identical logits."""
    skip = positions == "rope"
    cfg = preset("tiny", [f"model.positions={positions}", f"model.hidden={H}", f"model.heads={HEADS}",
                          f"model.intermediate={INTERMED}", "model.layers=2", f"model.injection={'every' if skip else 'first'}",
                          "model.init_state=zeros", f"model.abacus_table={TABLE}", f"model.max_k={K}"])
    torch.manual_seed(3)
    ours = ArithmeticTransformer.for_experiment(cfg).eval()
    arch = official_arch(positions, 2, 1, skip)
    official = official_state_dict(ours.state_dict(), cfg, seq_first=True, skip=skip)
    if positions == "abacus+fire":
        assert set(official) == set(official_tensors(arch))  # exactly the official names
    assert import_cli(write_official(tmp_path / "o", arch, official), tmp_path / "ours") == 0
    back = load_checkpoint(on_disk(tmp_path / "ours")).model
    ids = problem_ids()
    with torch.no_grad():
        assert torch.equal(back(ids), ours(ids))
    assert all(torch.equal(v, ours.state_dict()[k]) for k, v in back.state_dict().items())


def test_describe_shows_the_source(tmp_path, capsys):
    arch = official_arch("abacus", 1, 2, True)
    src = write_official(tmp_path / "run7", arch, official_tensors(arch))
    assert import_cli(src, tmp_path / "ours", "--name", "authors-abacus") == 0
    meta = read_json(on_disk(tmp_path / "ours" / "step-000000000" / "meta.json"))
    assert meta["imported_class"] == "ScriptableRecurrentLMReplicaConcat"
    assert meta["imported_from"] == str(src.resolve())
    assert len(meta["imported_weights_sha256"]) == 64 and meta["name"] == "authors-abacus"
    capsys.readouterr()
    assert main(["describe", str(tmp_path / "ours")]) == 0
    out = capsys.readouterr().out
    assert "ScriptableRecurrentLMReplicaConcat" in out and str(src.resolve()) in out
    assert meta["imported_weights_sha256"][:12] in out


def _bad_cases():
    def extra(arch, t):
        t["encoder.recurrent_block._orig_mod.layers.0.attn.attn.in_proj_bias"] = torch.zeros(3 * H)
        return "in_proj_bias"

    def missing(arch, t):  # named as the file names it, not by our internal key (head.w_out.weight)
        del t["encoder.head.dense_out.weight"]
        return "model.safetensors: no tensor encoder.head.dense_out.weight"

    def missing_in_a_layer(arch, t):
        del t["encoder.recurrent_block._orig_mod.layers.1.ffn.dense_in.weight"]
        return "no tensor encoder.recurrent_block._orig_mod.layers.1.ffn.dense_in.weight"

    def not_a_number(arch, t):
        t["decoder.weight"][3, 5] = float("nan")
        t["encoder.final_norm.bias"][0] = float("inf")
        return "model.safetensors: decoder.weight holds 1 NaN or infinite value(s) of"

    def oversized(arch, t):  # the file's own field, not the project key (model.hidden) it becomes
        arch["hidden_size"] = arch["embedding"]["embedding_dim"] = 10**9
        return "model_config.json: hidden_size: 1,000,000,000 is beyond the bound of 65,536"

    def shape(arch, t):
        t["decoder.weight"] = torch.zeros(VOCAB + 1, H)
        return "decoder.weight"

    def architecture(arch, t):
        arch["attention"]["type"] = "fourier"
        return "attention.type"

    def buffer(arch, t):
        t["encoder.embedding.pos_embedding.position_ids"] = torch.zeros(1, TABLE, dtype=torch.long)
        return "position_ids"

    def layers(arch, t):
        arch["layers_in_recurrent_block"] = 3  # the file holds 2: refused before the config's model is described
        return "holds 2 layer(s)"

    def skip_flag(arch, t):
        arch["forward_only_model_with_skip"] = True  # the names are those of the class without it
        return "ScriptableRecurrentLMReplicaConcat"

    return {"extra": extra, "missing": missing, "shape": shape, "architecture": architecture, "buffer": buffer,
            "layers": layers, "skip_flag": skip_flag, "missing_in_a_layer": missing_in_a_layer,
            "not_a_number": not_a_number, "oversized": oversized}


@pytest.mark.parametrize("case", sorted(_bad_cases()))
def test_bad_official_files_are_refused(tmp_path, capsys, case):
    arch = official_arch("abacus", 2, 1, False)
    tensors = official_tensors(arch)
    key = _bad_cases()[case](arch, tensors)
    src = write_official(tmp_path / "o", arch, tensors)
    capsys.readouterr()
    assert import_cli(src, tmp_path / "out" / "ckpt") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and key in err, err
    if key.startswith(("model.safetensors", "model_config.json")):  # the file by its path
        assert f"error: {src / key.split(':')[0]}: " in err, err
    assert not (tmp_path / "out").exists()


def test_a_pickle_is_not_read(tmp_path, capsys):
    arch = official_arch("abacus", 2, 1, False)
    src = tmp_path / "o"
    src.mkdir()
    (src / "model_config.json").write_text(json.dumps(arch))
    torch.save(official_tensors(arch), src / "model.safetensors")  # a pickle under the safetensors name
    assert import_cli(src, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip()
    assert "not a safetensors file" in err and len(err.splitlines()) == 1
    (src / "model.safetensors").rename(src / "model.pth")  # the legacy pickle name
    assert import_cli(src, tmp_path / "out") == 2
    assert "model.pth is not read" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_task_follows_the_vocabulary(tmp_path, capsys):
    arch = official_arch("abacus", 1, 1, False)
    src = write_official(tmp_path / "o", arch, official_tensors(arch))
    assert import_cli(src, tmp_path / "mul", "--task", "mul") == 0
    cfg = load_checkpoint(on_disk(tmp_path / "mul")).config
    assert (cfg.task.name, cfg.eval.grids) == ("mul", ("paper-multiplication",))
    assert import_cli(src, tmp_path / "sort", "--task", "sort") == 2  # 19 ids is not the sort vocabulary
    assert "vocab_size 19" in capsys.readouterr().err


def test_imported_model_goes_through_eval_and_summary(tmp_path, capsys):
    """An imported model is scored and summarised like any other, named by its source; eval-all finds it."""
    from abacus_ray import storage
    from abacus_ray.api.evaluate_all import find_models

    arch = official_arch("abacus", 1, 2, True)
    src = write_official(tmp_path / "authors-run", arch, official_tensors(arch))
    assert import_cli(src, tmp_path / "runs" / "ckpt") == 0
    runs = storage.resolve(tmp_path / "runs")
    assert find_models(runs) == [on_disk(tmp_path / "runs" / "ckpt" / "step-000000000")]
    assert main(["eval", str(tmp_path / "runs" / "ckpt"), "--cells", "1-2x1-2", "--per-cell", "4", "--out",
                 str(tmp_path / "res"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["summary", str(tmp_path / "res")]) == 0
    out = capsys.readouterr().out
    assert "official-authors-run" in out


def test_noise_settings_map(tmp_path):
    """`state_init: embed` (every paper shell) is our noise state with std 0.02."""
    from abacus_ray.model.official import model_config_of

    arch = official_arch("abacus", 1, 1, False)
    arch["state_init"] = "embed"
    m = model_config_of(arch)
    assert (m.init_state, m.init_std) == ("noise", 0.02)
    arch["initial_hidden_randomized"] = False
    with pytest.raises(ValueError, match="initial_hidden_randomized"):
        model_config_of(arch)


def test_a_file_uri_is_honoured_and_a_name_is_one_printable_line(tmp_path, capsys, monkeypatch):
    """DIR and --out go through the storage owner: file:// URIs are their local paths (no 'file:' folder
    appears in the working directory); a --name holding a newline is refused before anything is read."""
    arch = official_arch("abacus", 1, 1, False)
    src = write_official(tmp_path / "o", arch, official_tensors(arch))
    monkeypatch.chdir(tmp_path)
    assert import_cli(f"file://{src}", f"file://{tmp_path / 'via-uri'}", "--name", "from a URI") == 0
    assert load_checkpoint(on_disk(tmp_path / "via-uri")).config.name == "from a URI"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o", "via-uri"]
    capsys.readouterr()
    assert import_cli(src, tmp_path / "other", "--name", "two\nlines") == 2
    assert capsys.readouterr().err.startswith("abacus-ray import-official: error: --name: 'two\\nlines' holds the "
                                              "control character U+000A")
    assert not (tmp_path / "other").exists()


def _fields(node: dict, prefix: str = "") -> list[str]:
    return [f for k, v in node.items() for f in [prefix + k, *(_fields(v, f"{prefix}{k}.") if isinstance(v, dict) else [])]]


HOSTILE_VALUES = st.sampled_from([None, "x", "None", [], {}, -1, 0, 3.5, 1e400, 10**30, True])


@FUZZ
@given(field=st.sampled_from(_fields(official_arch("abacus+fire", 2, 2, True))), value=HOSTILE_VALUES)
def test_any_config_field_with_any_value_imports_or_is_refused_naming_the_file(field, value, tmp_path_factory):
    """Every field of model_config.json set to a hostile value: the import succeeds (a field it ignores) or
    is refused in one line naming the file, with nothing written; never a traceback."""
    arch = official_arch("abacus+fire", 2, 2, True)
    tensors = official_tensors(arch)
    *path, last = field.split(".")
    node = arch
    for part in path:
        node = node[part]
    node[last] = value
    root = tmp_path_factory.mktemp("hostile-config")
    src = write_official(root / "o", arch, tensors)
    code, _, err = run(["import-official", str(src), "--out", str(root / "out")])
    assert code in (0, 2) and "Traceback" not in err, (field, value, err)
    if code == 2:
        assert len(err.splitlines()) == 1 and err.split(": error: ")[1].startswith(str(src)), (field, value, err)
        assert not (root / "out").exists()
        tally("import-official: hostile config fields")
