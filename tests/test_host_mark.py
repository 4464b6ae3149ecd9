"""An NM host's quiet NMs in one ``HostMark``: liveness, answers and the journal, without Ray.

Cluster and app of ``tests/harness.py``: n1 <cpu:2>, n2 <cpu:1>, both run by host "nm";
app "a" asks for 4 tasks of <cpu:1>, 3 of which fit at once (2 on n1, 1 on n2).
"""

from __future__ import annotations

import pickle

from harness import Harness
from rayrm.rm.service.liveness import Liveness
from rayrm.rm.service.calls import Call
from rayrm.rm.service.protocol import RESYNC, HostMark, NodeRegistration
from rayrm.rm.service.store import StateStore, replay_records


def marked(h: Harness, dead=(), beats=2):
    """A call of host "nm" carrying no NM by name, its NMs in one mark, sent at ``h.now``."""
    return h.call("nm", Call.NODE_HEARTBEAT, [], (), h.now, HostMark(tuple(dead), beats))


def liveness(h: Harness) -> dict[str, tuple[float, float, int]]:
    h.rm.nodes.settle()
    return {n: (r.last_seen, r.last_sent, r.last_call) for n, r in sorted(h.rm.nodes.table.items())}


def test_a_mark_keeps_its_nms_alive_and_a_crashed_one_expires():
    h = Harness(apps=())
    h.now = 1.0
    assert marked(h) == []                   # nothing for either NM
    for t in range(2, 31):                   # n2 crashed at t = 2: its host leaves it out
        h.now = float(t)
        assert marked(h, dead=("n2",)) == []
    # n1 carried by the 30th call (sent at 30); n2 last by the first (sent at 1, call 1)
    assert liveness(h) == {"n1": (30.0, 30.0, 30), "n2": (1.0, 1.0, 1)}
    # n2: its host went on sending 29 s > expiry 5 s and 30 - 1 >= HOST_CALLS (20) calls without it
    assert Liveness().silent_nodes(h.rm, 30.0, 5.0) == ["n2"]
    # 29 marked calls of 2 NM beats each, counted as heartbeats
    assert h.rm.records.heartbeats == 60


def test_a_quiet_nm_gets_its_cleanup_and_a_lost_one_resync_from_the_next_mark():
    h = Harness()
    h.run(2.0)                               # 3 containers placed (2 on n1, 1 on n2) and RUNNING
    running = {c.container: c.node for c in h.rm.containers.table.values() if c.state == "RUNNING"}
    assert sorted(running.values()) == ["n1", "n1", "n2"]
    h.call("am", Call.FINISH_APPS, [("a", 1)])          # the app ends: its containers are killed
    answers = marked(h)
    assert {(r.node, r.action, frozenset(r.cleanup)) for r in answers} == {
        ("n1", "normal", frozenset(c for c, n in running.items() if n == "n1")),
        ("n2", "normal", frozenset(c for c, n in running.items() if n == "n2"))}
    assert marked(h) == []                   # said once
    h.apply(Call.EXPIRE_NODES, 1.0, ["n2"])
    assert [(r.node, r.action) for r in marked(h)] == [("n2", RESYNC)]
    h.apply(Call.EXPIRE_NODES, 1.0, ["n1"])
    assert marked(h, dead=("n1",)) == []     # stopped at its host too: nothing to tell it


def test_marks_replay_from_the_journal_and_a_restart_resyncs_every_marked_nm(tmp_path):
    h = Harness(store=StateStore(tmp_path), apps=())
    for t, dead in ((1.0, ()), (2.0, ("n2",)), (3.0, ("n2",))):
        h.now = t
        marked(h, dead)
    before = liveness(h)
    # n1 carried by the third call (sent at 3); n2 last by the first
    assert before == {"n1": (3.0, 3.0, 3), "n2": (1.0, 1.0, 1)}
    state, records = StateStore(tmp_path).load()     # what a restarted RM reads
    replay_records(state, records)
    state.nodes.settle()
    assert {n: (r.last_seen, r.last_sent, r.last_call) for n, r in sorted(state.nodes.table.items())} == before
    h.restart()
    assert sorted((r.node, r.action) for r in marked(h)) == [("n1", RESYNC), ("n2", RESYNC)]


def test_live_hosts_follow_registrations_and_losses():
    h, live = Harness(apps=()), Liveness()
    h.now = 1.0
    marked(h)
    # host "nm" marked at 1.0, nothing left out: no NM is read, none is silent at 5.0, and
    # the state (what snapshots and restores compare) is unchanged by the scan
    before = pickle.dumps(h.rm)
    assert live.silent_nodes(h.rm, 5.0, 5.0) == []
    assert pickle.dumps(h.rm) == before
    assert live.live_hosts(h.rm.nodes) == {"nm"}
    h.apply(Call.EXPIRE_NODES, 1.0, ["n1", "n2"])
    assert live.live_hosts(h.rm.nodes) == frozenset()
    h.rm.register_nodes(2.0, "nm2", 1, [NodeRegistration("n1", {"cpu": 2}, {}, "ray", 0)])
    assert live.live_hosts(h.rm.nodes) == {"nm2"}
