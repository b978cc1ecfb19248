"""`ArithmeticTransformer`: the depth-recurrent decoder every paper model is an instance of.

The official model it follows: docs/official-code.md §4.

    e      = LayerNorm( E_tok[ids] + P(ids) )        P = Abacus / learned / nothing
    s      = noise ~ N(0, init_std^2)  (or zeros)    the initial recurrent state
    repeat R times:
        injection "every":  for each layer l:  s = layer_l(s + e)     (ST w/ II, addition LTs)
        injection "first":  s = s + e;  for each layer l: s = layer_l(s)   (ST, multiplication LTs)
        injection "none":   s = s + e on the first recurrence only; then the layers
    logits = decoder( adapter( LayerNorm_final( FFN_head(s) ) ) )
                                        (pre-LN adds a LayerNorm before FFN_head)

The L distinct layers form the recurrent block applied R times. An "ST" is L x 1; because the state
starts as noise, even the ST adds its embedding to noise (docs/official-code.md §0.2). RoPE and
FIRE act inside attention; Abacus and learned positions are added to the token embedding.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from abacus_ray import plugins
from abacus_ray.config import ExperimentConfig, ModelConfig
from abacus_ray.model.cache import KVCache
from abacus_ray.model.init import deepnorm_init_
from abacus_ray.model.layers import DecoderLayer, GLUFeedForward, layer_norm
from abacus_ray.model.positions import (
    AbacusEmbedding,
    LearnedPositions,
    abacus_positions,
    draw_abacus_offset,
    shift_abacus,
    table_error,
)
from abacus_ray.plugins import position_bias
from abacus_ray.tasks.tokenizer import get_tokenizer


class ArithmeticTransformer(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int) -> None:
        super().__init__()
        if vocab_size < 1:
            raise ValueError(f"vocab_size: must be >= 1, got {vocab_size}")
        self.cfg, self.vocab_size = cfg, vocab_size
        h = cfg.hidden
        self.tok = nn.Embedding(vocab_size, h)
        self.abacus = AbacusEmbedding(cfg.abacus_table, h) if cfg.uses_abacus else None
        self.learned = LearnedPositions(cfg.abacus_table, h) if cfg.positions == "learned" else None
        self.emb_norm = layer_norm(h)
        rope = cfg.positions in ("rope", "abacus+rope")
        fire = cfg.positions in ("fire", "abacus+fire")
        self.layers = nn.ModuleList(
            DecoderLayer(h, cfg.intermediate, cfg.heads, norm=cfg.norm, rope=rope, fire=fire,
                         fire_max_length=cfg.fire_max_length, bias=position_bias(cfg.positions))
            for _ in range(cfg.layers))
        self.head_norm = layer_norm(h) if cfg.norm == "pre" else None
        self.head = GLUFeedForward(h, cfg.intermediate)
        self.final_norm = layer_norm(h)
        self.adapter = nn.Linear(h, h, bias=False)  # untied, docs/official-code.md §4.10
        self.decoder = nn.Linear(h, vocab_size, bias=False)  # untied, no bias
        deepnorm_init_(self, cfg.layers * cfg.recurrences, h)
        # One host sync per forward checks ids and Abacus positions (a clear ValueError instead of a
        # device-side assert); a compiled training loop that trusts its data may switch it off.
        self.validate_inputs = True
        self._compiled_block = None  # `compile_block`

    @classmethod
    def for_experiment(cls, cfg: ExperimentConfig) -> ArithmeticTransformer:
        """The model of an experiment: its `ModelConfig` over its task's tokenizer's vocabulary
        (its plugins imported first: a config Ray unpickled in a worker was never rebuilt)."""
        plugins.ensure(cfg.plugins)
        return cls(cfg.model, get_tokenizer(cfg.task.tokenizer_name).vocab_size)

    # ---------------------------------------------------------------- public helpers
    def new_cache(self) -> KVCache:
        """An empty cache: one (k, v) slot per layer application (layer x recurrence)."""
        return KVCache(layers=self.cfg.layers)

    def num_params(self) -> int:
        """All parameters, FIRE's frozen L0 included (the official `numel` count,
        docs/official-code.md §5)."""
        return sum(p.numel() for p in self.parameters())

    def initial_state(self, batch: int, seq: int, *, device: torch.device | str | None = None,
                      generator: torch.Generator | None = None) -> Tensor:
        """A fresh initial recurrent state [batch, seq, hidden]: init_std * N(0, 1), or zeros.

        Evaluation draws it from a per-cell generator and slices it per position so that
        teacher-forced, cached and naive decoding see the same noise at every position.
        """
        device = device if device is not None else self.tok.weight.device
        shape = (batch, seq, self.cfg.hidden)
        if self.cfg.init_state == "zeros":
            return torch.zeros(shape, device=device)
        # no `generator=None` kwarg: torch.compile cannot trace it with a dynamic shape
        drawn_from = {} if generator is None else {"generator": generator}
        return self.cfg.init_std * torch.randn(shape, device=device, **drawn_from)

    def flops_per_token(self, seq_len: int, recurrences: float | None = None, *,
                        grad_recurrences: float | None = None) -> float:
        """Training FLOPs (forward + backward) per token, for MFU.

        Per layer application the forward costs 2 x (its matmul weights: 4H^2 + H*I + H*I/2) plus
        4 * seq_len * H for QK^T and AV over the full context (the PaLM convention: no causal
        halving).
        The head costs 2 x (H*I + H*I/2 + H^2 + H*V). The backward costs twice the forward, but only
        for the last `grad_recurrences` recurrences (default: all) and the head:
            R * block + 2 * G * block + 3 * head,   block = L * per-layer forward.
        `recurrences` may be fractional (an expected depth under progressive loss); default
        `cfg.recurrences`. Embedding lookups and the FIRE MLP (shared by the batch) are left out.
        """
        c = self.cfg
        h, i, v = c.hidden, c.intermediate, self.vocab_size
        r = float(c.recurrences if recurrences is None else recurrences)
        g = r if grad_recurrences is None else float(grad_recurrences)
        block = c.layers * (2 * (4 * h * h + h * i + h * i // 2) + 4 * seq_len * h)
        head = 2 * (h * i + h * i // 2 + h * h + h * v)
        return r * block + 2 * g * block + 3 * head

    # ---------------------------------------------------------------- forward
    def forward(self, input_ids: Tensor, *, recurrences: int | None = None,
                grad_recurrences: int | None = None, noise: Tensor | None = None,
                cache: KVCache | None = None, all_recurrences: bool = False,
                abacus_offset: int | None = None) -> Tensor:
        """Logits [B, S, V] (float32), or [R, B, S, V] with `all_recurrences`.

        recurrences: total depth; default `cfg.recurrences` in training mode, `cfg.test_recurrences`
            in eval mode.
        grad_recurrences: only the last this-many recurrences build an autograd graph (the first
            ones run under no_grad: progressive loss / truncated BPTT); None = all.
        noise: the initial recurrent state [B, S, H], used as given; None draws `initial_state` from
            the global torch RNG.
        cache: incremental decoding; `input_ids` are the new tokens after the cached ones, and the
            cache is updated in place. Randomised FIRE is off while decoding with a cache.
        abacus_offset: k added to digit positions; default U{0..max_k} in training mode (drawn once
            per call, or reused from the cache's prefill), 0 in eval mode.
        """
        if input_ids.dim() != 2 or input_ids.shape[1] == 0 or input_ids.dtype.is_floating_point:
            raise ValueError(f"input_ids: expected a non-empty [batch, seq] integer tensor, got "
                             f"{input_ids.dtype} of shape {tuple(input_ids.shape)}")
        b, s = input_ids.shape
        depth = recurrences if recurrences is not None else (
            self.cfg.recurrences if self.training else self.cfg.test_recurrences)
        if depth < 1:
            raise ValueError(f"recurrences: must be >= 1, got {depth}")
        with_grad = depth if grad_recurrences is None else grad_recurrences
        if not 0 <= with_grad <= depth:
            raise ValueError(f"grad_recurrences: must be in 0..{depth} (the recurrences), "
                             f"got {grad_recurrences}")
        start = 0
        if cache is not None:
            cache.begin(b, depth)
            start = cache.length

        emb, run_end, offset = self._embed(input_ids, start, cache, abacus_offset)
        if noise is None:
            state = self.initial_state(b, s, device=input_ids.device)
        elif tuple(noise.shape) != (b, s, self.cfg.hidden):
            raise ValueError(f"noise: expected shape {(b, s, self.cfg.hidden)} "
                             f"(batch, new tokens, hidden), got {tuple(noise.shape)}")
        else:
            state = noise
        state = state.to(device=emb.device, dtype=emb.dtype)

        grad_enabled = torch.is_grad_enabled()
        first_grad = depth - with_grad
        outputs = []
        for r in range(depth):
            with torch.set_grad_enabled(grad_enabled and r >= first_grad):
                state = self._recurrence(state, emb, r, start, cache)
                if all_recurrences and r < depth - 1:
                    outputs.append(self._readout(state))
        outputs.append(self._readout(state))

        if cache is not None:
            cache.length += s
            cache.abacus_run, cache.abacus_offset = run_end, offset
        return torch.stack(outputs) if all_recurrences else outputs[-1]

    def _embed(self, input_ids: Tensor, start: int, cache: KVCache | None,
               abacus_offset: int | None) -> tuple[Tensor, Tensor | None, int | None]:
        """Normalised embedding e, each row's digit run at the end (for the cache), the Abacus k."""
        run_end, offset, raw = None, None, None
        if self.abacus is not None:
            continuing = cache is not None and start > 0
            raw = abacus_positions(input_ids, cache.abacus_run if continuing else None)
            run_end = raw[:, -1]
            if abacus_offset is not None:
                offset = abacus_offset
            elif continuing and cache.abacus_offset is not None:
                offset = cache.abacus_offset
            else:
                offset = draw_abacus_offset(self.cfg.max_k) if self.training else 0
            if offset < 0:
                raise ValueError(f"abacus_offset: must be >= 0, got {offset}")
        if self.validate_inputs:
            self._check_inputs(input_ids, raw, offset)
        x = self.tok(input_ids)
        if self.abacus is not None:
            x = x + self.abacus(shift_abacus(raw, offset))
        if self.learned is not None:
            x = x + self.learned(start, input_ids.shape[1], input_ids.device)
        return self.emb_norm(x), run_end, offset

    def _check_inputs(self, input_ids: Tensor, raw_positions: Tensor | None,
                      offset: int | None) -> None:
        stats = [input_ids.min(), input_ids.max()]
        if raw_positions is not None:
            stats.append(raw_positions.max())
        lo, hi, *run = torch.stack(stats).tolist()  # the one host sync
        if lo < 0 or hi >= self.vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(f"input_ids: token id {bad} is outside the vocabulary of "
                             f"{self.vocab_size} ids")
        if run and run[0] > 0 and run[0] + offset >= self.cfg.abacus_table:
            longest = run[0]
            raise table_error(f"Abacus position {longest + offset}", longest + offset + 1,
                              self.cfg.abacus_table, f"a {longest}-digit run + offset k={offset}")

    def compile_block(self, **compile_kwargs) -> None:
        """Compile the recurrent block alone, as the official code does (official-code.md §6.6).

        The block's graph sees only tensors of fixed shape: the depth, the progressive loss's (n, k)
        and the Abacus offset stay in eager Python around it, so they can change every call without
        a recompile, and `dynamic=False` keeps every size static (symbolic sizes crash the compiled
        forward: docs/performance.md, "The GPU path"). Callers keep the sequence length fixed too
        (the training loop pads every batch to the task's longest line,
        `tasks.stream.padded_length`); a new length only costs one more graph. The parameters are
        graph inputs, so a new model of the same shapes (a resumed run) reuses the graphs. Only
        training-mode forwards use it: evaluation, validation scoring and decoding with a KV cache
        stay eager, so their many shapes never recompile.
        """
        self._compiled_block = torch.compile(self._block, dynamic=False, **compile_kwargs)

    def drop_compiled_block(self) -> None:
        """Back to the eager block (a trained model handed on for evaluation or export)."""
        self._compiled_block = None

    def _block(self, state: Tensor, emb: Tensor) -> Tensor:
        """One application of the layer stack without a cache (training, teacher forcing; what
        `compile_block` compiles); `_recurrence` runs the cached variant for decoding."""
        every = self.cfg.injection == "every"
        for layer in self.layers:
            if every:
                state = state + emb
            state, _ = layer(state, 0, None, cached=False)
        return state

    def _recurrence(self, state: Tensor, emb: Tensor, r: int, start: int,
                    cache: KVCache | None) -> Tensor:
        inject = self.cfg.injection
        if inject == "first" or (inject == "none" and r == 0):
            state = state + emb
        if cache is None:
            compiled = self._compiled_block if self.training else None
            return (compiled or self._block)(state, emb)
        for index, layer in enumerate(self.layers):
            if inject == "every":
                state = state + emb
            past = cache.slot(r, index) if cache is not None and start > 0 else None
            state, kv = layer(state, start, past, cached=cache is not None)
            if cache is not None:
                cache.store(r, index, kv)
        return state

    def _readout(self, state: Tensor) -> Tensor:
        """head FFN -> final LayerNorm -> adapter -> decoder; float32 logits."""
        if self.head_norm is not None:
            state = self.head_norm(state)
        return self.decoder(self.adapter(self.final_norm(self.head(state)))).float()
