"""ALiBi (Press et al., 2022) as a position scheme of one's own: `model.positions=alibi`.

Each head h of H adds -m_h * (i - j) to the score of query i on key j, with the geometric slopes
m_h = 2^(-8 (h + 1) / H); no position table, nothing learned. `abacus+alibi` adds it to the Abacus
embedding. Registered at import; run it with the package as it is installed:

    abacus-ray train --plugin examples/alibi.py --set model.positions=alibi
    abacus-ray sweep fig3_embeddings --plugin examples/alibi.py --positions abacus,alibi
"""

import torch
from torch import Tensor, nn

from abacus_ray.plugins import register_positions


class ALiBi(nn.Module):
    """The per-head linear distance penalty (a buffer: no parameter)."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        slopes = [2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)]
        self.register_buffer("slopes", torch.tensor(slopes).view(heads, 1, 1), persistent=False)

    def forward(self, query_pos: Tensor, key_pos: Tensor) -> Tensor:
        distance = (query_pos[:, None] - key_pos[None, :]).clamp(min=0).to(self.slopes.dtype)
        return -self.slopes * distance  # [heads, queries, keys]


register_positions("alibi", ALiBi)
