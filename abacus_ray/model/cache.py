"""KV cache for incremental greedy decoding of a depth-recurrent model.

A looped L x R model applies each of its L layers R times, and every application sees a different
residual state, so the cache holds one (key, value) pair per *layer application* (slot r*L + l), not
per layer. It also keeps what the positions of the next tokens depend on: the token count (RoPE,
FIRE and learned positions continue from it), each row's current digit-run length (an Abacus run
that crosses the boundary keeps counting) and the Abacus offset used at prefill (so a whole decode
uses one k, as one full forward would).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class KVCache:
    layers: int
    slots: list[tuple[Tensor, Tensor] | None] = field(default_factory=list)
    length: int = 0  # tokens already processed
    recurrences: int | None = None  # depth the cache was filled with; later calls must match
    batch_size: int | None = None
    abacus_run: Tensor | None = None  # [B] length of the digit run at the end of the cached tokens
    abacus_offset: int | None = None

    def slot(self, recurrence: int, layer: int) -> tuple[Tensor, Tensor] | None:
        index = recurrence * self.layers + layer
        return self.slots[index] if index < len(self.slots) else None

    def store(self, recurrence: int, layer: int, kv: tuple[Tensor, Tensor]) -> None:
        index = recurrence * self.layers + layer
        while len(self.slots) <= index:
            self.slots.append(None)
        self.slots[index] = kv

    def begin(self, batch_size: int, recurrences: int) -> None:
        """Check a new call is compatible with what is cached (same batch, same depth)."""
        if self.length == 0:
            self.batch_size, self.recurrences = batch_size, recurrences
            return
        if batch_size != self.batch_size:
            raise ValueError(f"cache: holds a batch of {self.batch_size} rows, "
                             f"input_ids has {batch_size}")
        if recurrences != self.recurrences:
            raise ValueError(f"recurrences: the cache was filled with {self.recurrences} "
                             f"recurrences, this call asks for {recurrences}; use a new cache")

    def reset(self) -> None:
        self.slots.clear()
        self.length, self.recurrences, self.batch_size = 0, None, None
        self.abacus_run, self.abacus_offset = None, None

    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size()
                   for kv in self.slots if kv is not None for k, v in [kv])

    def to(self, device: torch.device | str) -> KVCache:
        self.slots = [None if kv is None else (kv[0].to(device), kv[1].to(device))
                      for kv in self.slots]
        if self.abacus_run is not None:
            self.abacus_run = self.abacus_run.to(device)
        return self
