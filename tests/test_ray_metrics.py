"""The RM's Ray metrics, scraped from Ray's Prometheus endpoint during a short replay.

Ray's metrics agent serves every node's metrics at ``http://NODE:<metrics export
port>/metrics`` (the port Ray's dashboard and Prometheus read).  The RM actor's
``ray.util.metrics`` appear there with Ray's ``ray_`` prefix.  This module starts
its own local Ray session with a 0.5 s metrics report interval (Ray's default is
10 s, longer than the replay) and polls the endpoint while a replay runs in a
thread, until the RM's counters show up or a deadline passes.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request

import pytest

ray = pytest.importorskip("ray")

from rayrm.rm.core.config import parse_config  # noqa: E402
from rayrm.rm.runtime.driver import replay  # noqa: E402
from rayrm.rm.runtime.session import SYSTEM_CONFIG  # noqa: E402

# 3 nodes of 1 CPU; j1: 12 tasks of 1 CPU, 4 s each -> 4 waves of 3: 16 trace s, 4 wall s at 0.25.
CONFIG = {
    "name": "metrics",
    "cluster": {"nodes": [{"name": "n{i}", "count": 3, "capacity": {"cpu": 1, "memory_mb": 1024}}]},
    "workload": {"jobs": [{"id": "j1", "submit": 0, "tasks": 12, "demand": {"cpu": 1, "memory_mb": 256},
                           "duration": 4}]},
    "policy": "tsf",
    "run": {"seed": 1, "time_scale": 0.25},
}
SAMPLE = re.compile(r'^(ray_rayrm_\w+?)(?:\{([^}]*)\})? ([0-9.e+-]+)$')
DEADLINE = 120.0


@pytest.fixture(scope="module")
def metrics_ray():
    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024 * 1024,
             namespace="rayrm", logging_level="ERROR",
             _system_config={**SYSTEM_CONFIG, "metrics_report_interval_ms": 500})
    yield ray._private.worker.global_worker.node.metrics_export_port
    ray.shutdown()


def scrape(port: int) -> dict[str, float]:
    """``{name{policy=...}: value}`` of the rayrm series on the endpoint (summed over workers)."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            policy = re.search(r'policy="([^"]*)"', m.group(2) or "")
            key = f"{m.group(1)}{{policy={policy.group(1) if policy else ''}}}"
            out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def test_the_rm_metrics_reach_rays_metrics_endpoint(metrics_ray, tmp_path):
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(
        summary=replay(parse_config(CONFIG), out=tmp_path / "run", progress=False)), daemon=True)
    worker.start()
    seen: dict[str, float] = {}
    allocated = "ray_rayrm_containers_allocated_total{policy=tsf}"
    deadline = time.monotonic() + DEADLINE
    # Poll until the RM has reported all 12 allocations, or the replay ended and one last
    # scrape was taken (metrics of the killed RM actor may vanish with it).
    while time.monotonic() < deadline:
        done = not worker.is_alive()
        for key, value in scrape(metrics_ray).items():
            seen[key] = max(seen.get(key, 0.0), value)
        if seen.get(allocated) == 12 or done:
            break
        time.sleep(0.2)
    worker.join(timeout=DEADLINE)
    assert result["summary"]["tasks"]["finished"] == 12
    # Each of the 12 tasks was allocated once; the endpoint must have shown some of it
    # (all 12 unless the RM's last batch was still unreported when its actor ended).
    assert 0 < seen.get(allocated, 0) <= 12, sorted(seen)
    assert seen.get("ray_rayrm_node_heartbeats_total{policy=tsf}", 0) > 0, sorted(seen)
    # 3 one-CPU nodes run at most 3 containers at once; at most all 12 asks wait.
    assert 0 < seen.get("ray_rayrm_running_containers{policy=tsf}", 0) <= 3, sorted(seen)
    assert seen.get("ray_rayrm_pending_asks{policy=tsf}", -1) <= 12, sorted(seen)
    # The histogram is exported too, tagged with the policy.
    names = {k.split("{")[0] for k in seen}
    assert {"ray_rayrm_pending_asks", "ray_rayrm_running_containers",
            "ray_rayrm_allocation_to_running_seconds_count"} <= names, sorted(names)
