"""The replay's YARN-style protocol, driven without Ray (rm/service/state.py), plus NM placement.

The cluster and app are tests/harness.py's: n1 <cpu:2; memory_mb:2048>, n2 <cpu:1;
memory_mb:1024; disk=ssd>; app "a" of 4 <cpu:1; memory_mb:512> tasks fits 2 on n1 and
1 on n2: 3 at once.
"""

from __future__ import annotations

import pytest
from harness import APP, Harness, complete, running

from rayrm.nodes.executors import choose_executor, peak_containers
from rayrm.nodes.placement import RayNode, place_nodes
from rayrm.rm.core.constraints import Constraint
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.service.calls import Call
from rayrm.rm.service.protocol import FENCED, LOST, RESYNC, RUNNING, AppRegistration, ContainerStatus, NodeHeartbeat

@pytest.fixture
def d():
    """The harness with app "a" registered (accepted) and nothing asked yet."""
    h = Harness(ask=False)
    assert h.rm.apps.table["a"].spec == APP
    return h


def test_allocations_wait_for_a_node_heartbeat_then_the_next_allocate(d):
    assert d.allocate(4).allocated == ()           # asked; nothing scheduled yet
    d.now = 1.0
    d.beat()                                       # NODE_UPDATE: 2 on n1 + 1 on n2
    got = d.allocate(4).allocated                  # the AM still asks 4: it has seen none yet
    assert sorted(a.node for a in got) == ["n1", "n1", "n2"]
    assert d.rm.pending_asks == 1                  # 4 asked - 3 delivered


def test_a_retried_call_is_answered_the_same_and_changes_nothing(d):
    d.allocate(4)
    d.beat()
    first = d.allocate(1)
    again = d.allocate(1, again=True)              # same request id: same answer
    assert again is first
    d.beat()
    assert d.rm.records.allocations == 3                   # no second round of containers


def test_ask_is_absolute_and_discounts_undelivered_containers(d):
    d.allocate(3)
    d.beat()                                       # 3 placed, not yet delivered
    got = d.allocate(3).allocated                  # the AM has not seen them: 3 - 3 = 0 more
    assert len(got) == 3 and d.rm.pending_asks == 0
    d.beat()
    assert d.allocate(0).allocated == ()


def test_completion_reaches_the_am_and_counts_once(d):
    d.allocate(4)
    d.beat()
    a = d.allocate(1).allocated[0]
    d.now = 2.0
    d.beat([running(a, 0, 1.5)])
    resp = d.beat([complete(a, 0, 1.5, 2.0)])
    ack = [r for r in resp if r.node == a.node][0].ack
    assert ack == (a.container,)
    d.beat([complete(a, 0, 1.5, 2.0)])             # NM repeats before it saw the ack
    done = d.allocate(0).completed
    assert [s.container for s in done] == [a.container]
    assert d.rm.records.finished == 1 and d.rm.records.duplicate_finishes == 0
    row = d.rm.log.tasks[("a", 0, 0)]
    assert row[5:] == [1.5, 2.0, "finished"]


def test_fencing_refuses_foreign_containers_and_stale_attempts(d):
    d.allocate(4)
    d.beat()
    a = d.allocate(1).allocated[0]
    other = "n2" if a.node == "n1" else "n1"
    forged = ContainerStatus(a.container, "a", 0, 0, other, RUNNING, 1.0)
    resp = d.call("nm", Call.NODE_HEARTBEAT, [NodeHeartbeat(other, (forged,))])
    assert resp[0].cleanup == (a.container,)       # an NM may report only its own containers
    assert d.rm.records.refused == 1
    assert d.allocate(0, attempt=2).action == FENCED


def test_a_lost_node_reports_its_containers_lost_and_the_am_asks_again(d):
    d.allocate(4)
    d.beat()
    got = d.allocate(1).allocated
    on_n2 = [a for a in got if a.node == "n2"][0]
    d.beat([running(on_n2, 3, 0.5)])
    d.now = 5.0
    assert d.rm.lose_node(5.0, "n2") == [on_n2.container]
    lost = d.allocate(2).completed
    assert [(s.container, s.exit) for s in lost] == [(on_n2.container, LOST)]
    assert d.rm.log.tasks[("a", 3, 0)][7] == "lost"
    resp = d.beat()
    assert [r.action for r in resp if r.node == "n2"] == [RESYNC]   # n2 must register again


def test_silent_nodes_expire(d):
    d.now = 10.0
    d.call("nm", Call.NODE_HEARTBEAT, [NodeHeartbeat("n1")])
    assert d.rm.expire_nodes(10.5, expiry_wall=5.0) == ["n2"]


def test_an_app_no_node_can_run_is_rejected_with_the_reason(d):
    huge = AppSpec("huge", Resources.parse("cpu:4;memory_mb:512"), num_tasks=1)
    answer = d.call("am", Call.REGISTER_APPS, [AppRegistration(huge)])[0]
    assert not answer.accepted and "exceeds every eligible node" in answer.reason
    assert d.rm.log.jobs["huge"]["status"] == "rejected"


# ----- placement of NMs on Ray nodes and the executor rule -------------------------

RAY = [RayNode("head", "10.0.0.1", 2.0, {}, True), RayNode("w1", "10.0.0.2", 2.0, {"disk": "ssd"})]


def test_nms_follow_matching_labels_and_otherwise_spread():
    specs = [NodeSpec(f"m{i}", Resources(cpu=1), {"disk": "ssd"} if i < 2 else {}) for i in range(6)]
    placed = {n: r.node_id for n, r in place_nodes(specs, RAY).items()}
    # m0, m1 carry disk=ssd: only w1 has that label.  m2..m5 tie and balance 4 on head
    # against 2 already on w1: head gets 3, w1 gets 1 more (3 each).
    assert placed["m0"] == placed["m1"] == "w1"
    assert sorted(placed.values()).count("head") == 3


def test_a_conflicting_label_excludes_a_ray_node():
    specs = [NodeSpec("h", Resources(cpu=1), {"disk": "hdd"})]
    assert place_nodes(specs, RAY)["h"].node_id == "head"


def test_auto_executor_uses_tasks_only_when_workers_can_hold_the_peak():
    nodes = [NodeSpec(f"n{i}", Resources(cpu=2, memory_mb=1024)) for i in range(4)]
    apps = [AppSpec("x", Resources(cpu=0.5, memory_mb=512), 10, constraint=Constraint.parse("node in (n0, n1)"))]
    # n0 and n1 hold 2 tasks each (memory-bound); n2, n3 admit no app: peak 4
    assert peak_containers(nodes, apps, ("cpu", "memory_mb")) == 4
    # nodes alike but for their name share their term: two <4 cpu, 4 GB> with gpu=1 and one
    # without; x <1, 1> on gpu nodes fits 4 each, y <2, 1> anywhere 2: 4 + 4 + 2 = 10
    alike = [NodeSpec(f"g{i}", Resources(cpu=4, memory_mb=4), {"gpu": 1}) for i in range(2)]
    alike.append(NodeSpec("p", Resources(cpu=4, memory_mb=4)))
    two = [AppSpec("x", Resources(cpu=1, memory_mb=1), 1, constraint=Constraint.parse("gpu == 1")),
           AppSpec("y", Resources(cpu=2, memory_mb=1), 1)]
    assert peak_containers(alike, two, ("cpu", "memory_mb")) == 10
    assert choose_executor("auto", {"r": 4}, {"r": 1.0}) == "task"
    assert choose_executor("auto", {"r": 100}, {"r": 2.0}) == "actor"
    assert choose_executor("task", {"r": 100}, {"r": 2.0}) == "task"


def test_replay_plan_places_nms_and_their_later_joins():
    from rayrm.rm.core.config import parse_config
    from rayrm.rm.runtime.plan import plan_replay
    cfg = parse_config({
        "cluster": {"nodes": [
            {"name": "a{i}", "count": 2, "capacity": {"cpu": 2, "memory_mb": 2048}, "attributes": {"disk": "ssd"}},
            {"name": "b{i}", "count": 2, "capacity": {"cpu": 1, "memory_mb": 2048}}],
            "events": [{"time": 5, "leave": "b1"},
                       {"time": 9, "join": {"name": "s1", "capacity": {"cpu": 1, "memory_mb": 1024},
                                            "attributes": {"disk": "ssd"}}}]},
        "workload": {"jobs": [{"id": "j", "tasks": 3, "demand": {"cpu": 0.5, "memory_mb": 512}, "duration": 1}]}})
    ray_nodes = [RayNode("head", "h", 1.0, {}, True), RayNode("w1", "w", 1.0, {"disk": "ssd"})]
    plan = plan_replay(cfg, ray_nodes)
    assert [n.name for n in plan.hosted["w1"]] == ["a1", "a2"]
    assert [n.name for n in plan.hosted["head"]] == ["b1", "b2"]
    assert [(t, kind, name) for t, kind, name, _ in plan.events["w1"]] == [(9, "join", "s1")]
    assert [(t, kind, name) for t, kind, name, _ in plan.events["head"]] == [(5, "leave", "b1")]
    # w1: a1, a2 hold 4 tasks each (<0.5 cpu, 512 MB>), s1 2 more: 10 > 4 workers per CPU
    assert plan.peaks == {"w1": 10, "head": 4} and plan.executor == "actor"
    assert plan.warm == {"w1": 4, "head": 4}


def test_idle_nms_beat_as_bare_names_and_are_answered_only_when_needed(d):
    d.allocate(4)
    resp = d.call("nm", Call.NODE_HEARTBEAT, [], ("n1", "n2"))   # nothing to report: no answers
    assert resp == [] and d.rm.records.heartbeats == 2 and d.rm.records.allocations == 3   # yet NODE_UPDATE ran
    d.rm.lose_node(d.now, "n2")
    resp = d.call("nm", Call.NODE_HEARTBEAT, [], ("n1", "n2"))
    assert [(r.node, r.action) for r in resp] == [("n2", RESYNC)]          # n2 must register again
