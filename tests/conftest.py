"""Shared test settings: small thread counts so the suite behaves the same on 2-core CI machines."""

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import torch  # noqa: E402

torch.set_num_threads(min(2, os.cpu_count() or 1))

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def ray_local():
    """An embedded local Ray on 127.0.0.1 with 2 CPUs and one fake GPU slot, shared across tests.

    The fake GPU makes every Ray Data evaluation run a GPU pool beside the CPU pool; the GPU actor
    falls back to the CPU because CUDA is absent. Tests that need their own cluster shut it down.
    """
    os.environ.pop("RAY_ADDRESS", None)
    import ray

    from abacus_ray.cluster import runtime

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, num_gpus=1, include_dashboard=False,
                 object_store_memory=200 * 1024**2, log_to_driver=False, _node_ip_address="127.0.0.1")
    runtime.quiet_data_progress()
    yield ray
    ray.shutdown()  # free the cores for the rest of the suite
