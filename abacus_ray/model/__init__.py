"""model layer: the Abacus transformer family (ModelConfig, ArithmeticTransformer, positions)."""

from abacus_ray.config.model import ModelConfig
from abacus_ray.model.cache import KVCache
from abacus_ray.model.positions import abacus_positions
from abacus_ray.model.transformer import ArithmeticTransformer

__all__ = ["ArithmeticTransformer", "KVCache", "ModelConfig", "abacus_positions"]
