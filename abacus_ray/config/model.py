"""`ModelConfig`: the Abacus transformer family (docs/official-code.md §4-5, Table 5), and the
paper's names for its architectures (ST, ST w/ II, LT) in both directions: name -> overrides for
sweeps, config -> name for tables and dashboards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from abacus_ray import plugins
from abacus_ray.config import bounds
from abacus_ray.config.dicts import check, check_choice

POSITIONS = ("abacus", "fire", "rope", "nope", "learned", "abacus+fire", "abacus+rope")
INJECTIONS = ("none", "first", "every")
NORMS = ("post", "pre")
INIT_STATES = ("noise", "zeros")
K_DRAWS = ("uniform", "balanced")  # the Abacus offset draw (model/positions.py OffsetDraw)


def positions_choices() -> tuple[str, ...]:
    """The built-in position schemes and the registered ones (`abacus_ray.plugins`), each also with
    the Abacus embedding."""
    return POSITIONS + tuple(p for name in plugins.POSITIONS for p in (name, f"abacus+{name}"))


@dataclass(frozen=True)
class ModelConfig:
    """An L x R depth-recurrent decoder; every paper model is one of these (official-code.md §0.1).

    `layers` distinct layers form the recurrent block, applied `recurrences` times. `injection`
    adds the normalised embedding to the state before `every` layer of each recurrence (the paper's
    ST w/ II and addition LTs), only before the `first` layer of each recurrence (ST, multiplication
    LTs), or `none` (once at the start only). Defaults are Table 5's.
    """

    positions: str = "abacus"
    layers: int = 16
    recurrences: int = 1
    injection: str = "every"
    hidden: int = 1024
    intermediate: int = 2048  # the GLU's input width; the gated width is intermediate // 2
    heads: int = 16
    max_k: int = 100  # Abacus offset k in {0..max_k} in training
    # uniform: the paper's k ~ U{0..max_k}; balanced: every row trained alike (model.positions)
    k_draw: str = "uniform"
    abacus_table: int = 512  # rows of the Abacus (and learned) position table
    norm: str = "post"
    # noise: N(0, init_std^2) initial recurrent state (official code); zeros
    init_state: str = "noise"
    init_std: float = 0.02
    # > 0: randomised FIRE positions drawn from 0..fire_max_length-1 in training
    fire_max_length: int = 0
    eval_recurrences: int | None = None  # test-time recurrences; None = recurrences

    def __post_init__(self) -> None:
        check_choice(self.positions, "model.positions", positions_choices())
        check_choice(self.injection, "model.injection", INJECTIONS)
        check_choice(self.norm, "model.norm", NORMS)
        check_choice(self.init_state, "model.init_state", INIT_STATES)
        for key in ("layers", "recurrences", "hidden", "intermediate", "heads", "abacus_table"):
            v = getattr(self, key)
            check(v >= 1, f"model.{key}", f"must be >= 1, got {v}")
        for key, bound in (("layers", bounds.MAX_LAYERS), ("recurrences", bounds.MAX_RECURRENCES),
                           ("hidden", bounds.MAX_HIDDEN), ("intermediate", bounds.MAX_INTERMEDIATE),
                           ("heads", bounds.MAX_HEADS), ("abacus_table", bounds.MAX_TABLE),
                           ("fire_max_length", bounds.MAX_POSITIONS)):
            bounds.check_at_most(getattr(self, key), bound, f"model.{key}")
        check(self.hidden % self.heads == 0, "model.heads",
              f"{self.heads} heads do not divide model.hidden={self.hidden}")
        check(self.intermediate % 2 == 0, "model.intermediate",
              f"must be even (GLU halves it), got {self.intermediate}")
        check(self.max_k >= 0, "model.max_k", f"must be >= 0, got {self.max_k}")
        check_choice(self.k_draw, "model.k_draw", K_DRAWS + tuple(plugins.K_DRAWS))
        check(self.init_std >= 0, "model.init_std", f"must be >= 0, got {self.init_std}")
        check(self.fire_max_length >= 0, "model.fire_max_length",
              f"must be >= 0, got {self.fire_max_length}")
        check(self.eval_recurrences is None or self.eval_recurrences >= 1, "model.eval_recurrences",
              f"must be >= 1, got {self.eval_recurrences}")
        bounds.check_at_most(self.eval_recurrences or 1, bounds.MAX_RECURRENCES,
                             "model.eval_recurrences")
        if self.positions in ("rope", "abacus+rope"):
            check((self.hidden // self.heads) % 2 == 0, "model.heads",
                  "RoPE needs an even head dimension")

    @property
    def uses_abacus(self) -> bool:
        return self.positions.startswith("abacus")

    @property
    def test_recurrences(self) -> int:
        return self.eval_recurrences or self.recurrences


def standard(layers: int) -> dict[str, Any]:
    """ST: L x 1, the embedding added once before the first layer (the official class without the
    skip flag)."""
    return {"model.layers": layers, "model.recurrences": 1, "model.injection": "first"}


def standard_ii(layers: int) -> dict[str, Any]:
    """ST w/ II: L x 1 with the embedding added before every layer."""
    return {"model.layers": layers, "model.recurrences": 1, "model.injection": "every"}


def looped(layers: int, recurrences: int, injection: str = "every") -> dict[str, Any]:
    """LT: an L-layer block applied R times; addition LTs inject before every layer
    (docs/official-code.md §4.1)."""
    return {"model.layers": layers, "model.recurrences": recurrences, "model.injection": injection}


# The paper's three architectures at effective depth 16, and the tiny preset's stand-ins for them.
# The official addition shells train ST with micro-batch 256, ST w/ II and LT with 512 (the
# preset's; docs/official-code.md §6.5, §6.10): under a budget the micro-batch sets where the batch
# ramp starts.
ST_MICRO_BATCH = 256
PAPER_ARCHS = ({**standard(16), "train.micro_batch": ST_MICRO_BATCH}, standard_ii(16),
               looped(1, 16))
EMBEDDINGS = ("abacus", "fire", "nope")  # Fig. 3's position embeddings
TINY_ARCHS = (standard(2), standard_ii(2), looped(1, 2))


def architecture_name(recurrences: int, injection: str) -> str:
    """The paper's name of a model: ST, ST w/ II (input injection) or LT (looped); the inverse of
    the builders above."""
    if int(recurrences) > 1:
        return "LT" if injection == "every" else f"LT (inject {injection})"
    if injection == "every":
        return "ST w/ II"
    return "ST" if injection == "first" else f"ST (inject {injection})"


def block_name(layers: int, recurrences: int) -> str:
    """`layers x recurrences`, the paper's "Layers in Recurrent Block X Number of Recurrences"."""
    return f"{int(layers)}x{int(recurrences)}"
