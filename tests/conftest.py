"""Shared fixtures."""

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray session per test module (address='local': never join another cluster
    that happens to run on this machine)."""
    import ray

    from rayrm.rm.runtime.session import SYSTEM_CONFIG

    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024 * 1024,
             namespace="rayrm", logging_level="ERROR", _system_config=SYSTEM_CONFIG)
    yield
    ray.shutdown()
