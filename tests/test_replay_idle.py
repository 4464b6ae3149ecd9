"""Idle NMs and AMs sent bare (the replay's CPU per task at paper scale), no Ray.

An NM host sends NMs with nothing to report as bare names, and an AM host sends AMs
whose ask is the one they sent last and that release nothing as bare (app, attempt):
the RM treats each as its full heartbeat again and answers it only when it has
something for it.  Harness cluster: n1 holds 2 of app a's tasks, n2 holds 1.
"""

from __future__ import annotations

from harness import Harness

from rayrm.rm.service.protocol import FENCED, NORMAL, RESYNC, Call


def test_idle_nms_are_heard_and_answered_only_when_the_rm_has_something_for_them():
    h = Harness()                                     # the AM asked for all 4 tasks at t = 0
    h.now = 1.0
    beats_before = h.rm.records.heartbeats
    out = h.call("nm", Call.NODE_HEARTBEAT, [], ("n1", "n2"), 1.0)
    assert out == []                                  # nothing to say to either
    assert h.rm.records.heartbeats == beats_before + 2
    assert h.rm.nodes.table["n1"].last_seen == 1.0 and h.rm.nodes.table["n2"].last_sent == 1.0
    # the idle heartbeat is a NODE_UPDATE all the same: 2 + 1 containers placed
    assert h.rm.records.allocations == 3
    # an NM the RM does not know is told to register; another host's NM is fenced;
    # one with a container to kill gets it
    h.rm.nodes.table["n2"].cleanup.append(99)
    out = h.call("nm", Call.NODE_HEARTBEAT, [], ("n9", "n2"), 2.0)
    assert [(r.node, r.action, r.cleanup) for r in out] == [("n9", RESYNC, ()), ("n2", NORMAL, (99,))]
    refused = h.rm.records.refused
    out = h.call("nm2", Call.NODE_HEARTBEAT, [], ("n1",), 2.0)
    assert [(r.node, r.action) for r in out] == [("n1", FENCED)] and h.rm.records.refused == refused + 1


def test_an_idle_am_keeps_its_ask_and_hears_only_news():
    h = Harness()                                     # full request: ask 4
    h.now = 1.0
    h.call("nm", Call.NODE_HEARTBEAT, [], ("n1", "n2"), 1.0)     # places 3 of the 4
    pending = h.rm.scheduler.cluster.apps["a"].pending
    assert pending == 1                               # 4 asked - 3 placed
    out = h.call("am", Call.ALLOCATE, [], 1.0, (("a", 1),))
    # bare: its ask is still 4, less the 3 undelivered = 1 pending, unchanged; the 3 delivered
    assert len(out) == 1 and out[0].app == "a" and len(out[0].allocated) == 3
    assert h.rm.scheduler.cluster.apps["a"].pending == 1 and h.rm.apps.table["a"].last_sent == 1.0
    # nothing new: no answer at all, and the long poll's second half has none either
    assert h.call("am", Call.ALLOCATE, [], 1.5, (("a", 1),)) == []
    assert h.rm.apply(Call.POLL, 1.5, "am", h.rid["am"], [], (("a", 1),)) == []
    # a bare AM of an attempt that is not current is fenced, as a full request would be
    assert [(r.app, r.action) for r in h.call("am", Call.ALLOCATE, [], 2.0, (("a", 2),))] == [("a", FENCED)]


def test_heartbeat_slots_are_no_narrower_than_the_floor_and_the_interval_is_unchanged():
    from rayrm.nodes.host import MIN_BATCH_WINDOW, slot_count
    assert MIN_BATCH_WINDOW == 0.005
    # time scale 0.05: a 0.05 s interval, ten 5 ms slots (the floor does not bind)
    assert slot_count(1000, 0.05) == 10
    # 0.02: ten slots would be 2 ms wide; 0.02 / 0.005 = 4 slots, each NM still beats every 0.02 s
    assert slot_count(1000, 0.02) == 4
    # 0.005: one slot holding every NM; 1 s (time scale 1): still ten
    assert slot_count(1000, 0.005) == 1 and slot_count(1000, 1.0) == 10
    # never more slots than NMs, none for no NMs; window 0 is one slot per NM; a given window wins
    assert slot_count(3, 1.0) == 3 and slot_count(0, 1.0) == 0
    assert slot_count(7, 0.02, 0.0) == 7 and slot_count(1000, 0.02, 0.002) == 10
