"""A sweep on a three-node Ray cluster (ray.cluster_utils.Cluster, one CPU per node):
with three simulations at a time each node runs some, and the results come back to
this process through Ray, not a shared directory."""

from __future__ import annotations

import pytest
import yaml

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from rayrm.rm.cli.main import main  # noqa: E402
from rayrm.rm.runtime.session import SYSTEM_CONFIG  # noqa: E402
from rayrm.rm.runtime.sweep import read_manifest  # noqa: E402

STORE = 80 * 1024 * 1024


@pytest.fixture(scope="module")
def three_nodes():
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False, "_system_config": SYSTEM_CONFIG})
    for _ in range(2):
        cluster.add_node(num_cpus=1, object_store_memory=STORE)
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


def test_cells_spread_to_every_node(three_nodes, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "workload": {"generate": "google", "nodes": 30, "jobs": 60, "tasks": 1500, "max_duration": 600},
        "grid": {"load": [0.5, 2.0]}, "policies": ["tsf", "drf", "cdrf"], "seeds": "1-2"}))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "3",
                 "--address", three_nodes.address]) == 0
    records = list(read_manifest(tmp_path / "out").values())
    # 2 loads x 2 seeds x 3 policies = 12 simulations, all finished
    assert len(records) == 12 and {r["status"] for r in records} == {"ok"}
    ray.init(address=three_nodes.address, logging_level="ERROR")
    try:
        nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    finally:
        ray.shutdown()
    assert len(nodes) == 3 and {r["node"] for r in records} == nodes
    assert len(open(tmp_path / "out" / "sweep.csv").read().splitlines()) == 1 + 2 * 2   # 2 cells x drf, cdrf
