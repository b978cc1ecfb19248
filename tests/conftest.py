"""Shared test settings: small thread counts so the suite behaves the same on 2-core CI machines."""

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import torch  # noqa: E402

torch.set_num_threads(min(2, os.cpu_count() or 1))
