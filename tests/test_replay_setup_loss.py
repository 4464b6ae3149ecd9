"""A Ray node lost while the replay is being set up, before t = 0 (its own two-node cluster:
the test takes a node away).

The small config's NMs are planned over both Ray nodes (a1, a2 on the head, labelled
disk=ssd; b1, b2 on the worker).  The worker is removed right after that plan: the NM host
pinned to it cannot be scheduled, so the start fails.  Nothing has run yet, so the driver
kills what it started and plans again on the head alone — every NM there — and the replay
runs whole: 20 + 10 tasks finished once, every invariant holding.
"""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from samples import small_config, small_two_node_cluster  # noqa: E402

from rayrm.nodes.placement import RayNode, alive_ray_nodes  # noqa: E402
from rayrm.rm.core.errors import RunError  # noqa: E402
from rayrm.rm.runs.check import check_run  # noqa: E402
from rayrm.rm.runs.reader import RunDir  # noqa: E402
from rayrm.rm.runtime import driver  # noqa: E402
from rayrm.rm.runtime.session import NodeLeft, Session  # noqa: E402

@pytest.fixture(scope="module")
def cluster():
    c, node = small_two_node_cluster()
    yield c, node
    ray.shutdown()
    c.shutdown()


def test_a_node_lost_before_t0_is_planned_around(cluster, tmp_path, monkeypatch, capsys):
    c, worker = cluster
    plans, plan_stage = [], driver.plan_stage

    def plan_then_lose_the_worker(run):
        placed = plan_stage(run)
        plans.append(len(placed.plan.hosted))
        if len(plans) == 1:
            c.remove_node(worker)
        return placed

    monkeypatch.setattr(driver, "plan_stage", plan_then_lose_the_worker)
    summary = driver.replay(small_config(), out=tmp_path, progress=False)
    # first plan: NM hosts on both Ray nodes; second: one host, on the head
    assert plans == [2, 1]
    assert "left before t = 0; placing the replay again" in capsys.readouterr().err
    assert check_run(tmp_path).ok
    assert summary["ray_nodes"] == 1
    assert summary["tasks"]["finished"] == 30 and summary["tasks_finished_twice"] == 0
    assert set(RunDir(tmp_path).nodes.node) == {"a1", "a2", "b1", "b2"}


def test_a_start_failing_with_every_node_alive_is_one_error_not_a_retry(cluster, tmp_path, monkeypatch):
    """No node lost: the failure is not the cluster's shape, so planning again would fail
    the same way — one RunError (the CLI's one line, exit 1) naming the cause."""
    starts = []

    def start_fails(run, placed, session):
        starts.append(placed)
        raise ray.exceptions.RaySystemError("the raylet refused")

    monkeypatch.setattr(driver, "start_stage", start_fails)
    monkeypatch.setattr(driver, "NODE_DEATH_WAIT", 0.2)
    with pytest.raises(RunError, match="the replay's actors could not start: .*the raylet refused"):
        driver.replay(small_config(), out=tmp_path, progress=False)
    assert len(starts) == 1


@ray.remote(num_cpus=0)
class Gate:
    """A call that answers only once the gate opens."""

    def __init__(self):
        import asyncio
        self.opened = asyncio.Event()

    async def wait(self):
        await self.opened.wait()
        return "through"

    async def open(self):
        self.opened.set()


def test_a_start_waiting_on_a_node_that_is_gone_fails_at_once(cluster):
    """Session.get fails with NodeLeft while a call is unanswered and a planned node is not
    alive (here one Ray never had), rather than waiting on the call; with every planned
    node alive it is ray.get."""
    import threading
    gate = Gate.remote()
    session = Session()
    session.nodes = [RayNode("ab" * 28, "10.0.0.9", 1.0)]
    # were it ray.get, the call would return once this opens the gate: no NodeLeft, a failure
    later = threading.Timer(60, lambda: gate.open.remote())
    later.start()
    with pytest.raises(NodeLeft, match="Ray node abababab is no longer alive"):
        session.get([gate.wait.remote()])
    later.cancel()
    session.nodes = alive_ray_nodes()
    waiting = gate.wait.remote()
    ray.get(gate.open.remote())
    assert session.get([waiting]) == ["through"]
    ray.kill(gate)
