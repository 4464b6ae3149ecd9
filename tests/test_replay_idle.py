"""Idle NMs and AMs sent bare (the replay's CPU per task at paper scale), no Ray.

An NM host sends NMs with nothing to report as bare names, and an AM host sends the AMs
whose ask is the one they sent last and that release nothing in one ``AppMark``: the RM
treats each as its full heartbeat again and answers it only when it has something for it.  Harness cluster: n1 holds 2 of app a's tasks, n2 holds 1.
"""

from __future__ import annotations

from harness import Harness

from rayrm.rm.service.calls import Call
from rayrm.rm.service.protocol import FENCED, NORMAL, RESYNC, AppMark


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


def test_idle_ams_in_one_mark_keep_their_ask_and_hear_only_news():
    h = Harness()                                     # full request: ask 4
    h.now = 1.0
    h.call("nm", Call.NODE_HEARTBEAT, [], ("n1", "n2"), 1.0)     # places 3 of the 4
    assert h.rm.scheduler.cluster.apps["a"].pending == 1          # 4 asked - 3 placed
    out = h.call("am", Call.ALLOCATE, [], 1.0, AppMark())
    # idle: its ask is still 4, less the 3 undelivered = 1 pending, unchanged; the 3 delivered
    assert len(out) == 1 and out[0].app == "a" and len(out[0].allocated) == 3
    assert h.rm.scheduler.cluster.apps["a"].pending == 1
    h.rm.apps.settle()
    assert h.rm.apps.table["a"].last_sent == 1.0                  # the mark carried it
    # nothing new: no answer at all, and the long poll's second half has none either
    assert h.call("am", Call.ALLOCATE, [], 1.5, AppMark()) == []
    assert Call.POLL.apply(h.rm, 1.5, "am", h.rid["am"], [], AppMark()) == []
    h.rm.apps.settle()
    assert h.rm.apps.table["a"].last_sent == 1.5


def test_an_am_left_out_of_its_hosts_marks_expires_and_an_idle_stale_attempt_is_fenced():
    from rayrm.rm.service.liveness import Liveness
    h = Harness()
    for t in range(1, 31):                            # the AM of "a" crashed at t = 1: left out after
        h.now = float(t)                              # (no NM beats: nothing placed, nothing to say)
        assert h.call("am", Call.ALLOCATE, [], float(t), AppMark(("a",) if t > 1 else ())) == []
    h.rm.apps.settle()
    # carried by the first call only: sent at 1, the host's first stamped allocate
    assert (h.rm.apps.table["a"].last_sent, h.rm.apps.table["a"].last_call) == (1.0, 1)
    # its host went on sending 30 - 1 = 29 s > expiry 5 s, and 30 - 1 = 29 >= HOST_CALLS (20)
    # calls, without it
    assert Liveness().silent_apps(h.rm, 30.0, 5.0) == ["a"]
    h.apply(Call.EXPIRE_APPS, 5.0, ["a"])             # attempt 1 fails; the RM launches attempt 2
    assert h.rm.apps.table["a"].attempt == 2 and h.rm.apps.table["a"].launching
    refused = h.rm.records.refused
    # had the host's AM of attempt 1 been idle (not left out), its next call fences it, once
    out = h.call("am", Call.ALLOCATE, [], 31.0, AppMark())
    assert [(r.app, r.action) for r in out] == [("a", FENCED)] and h.rm.records.refused == refused + 1
    assert h.call("am", Call.ALLOCATE, [], 32.0, AppMark()) == []


def test_after_a_restart_every_idle_am_is_told_to_resync_by_its_hosts_next_mark():
    h = Harness()
    h.now = 1.0
    h.rm.recovered(1.0)
    out = h.call("am", Call.ALLOCATE, [], 1.0, AppMark())
    assert [(r.app, r.action) for r in out] == [("a", RESYNC)]
    # an AM left out (registering again, say) hears it once it is idle again
    h.rm.recovered(2.0)
    assert h.call("am", Call.ALLOCATE, [], 2.0, AppMark(("a",))) == []
    assert [(r.app, r.action) for r in h.call("am", Call.ALLOCATE, [], 2.5, AppMark())] == [("a", RESYNC)]


def test_heartbeat_slots_are_no_narrower_than_the_floor_and_the_interval_is_unchanged():
    from rayrm.nodes.slots import MIN_BATCH_WINDOW, slot_count
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


def test_app_marks_replay_from_the_journal(tmp_path):
    from rayrm.rm.service.store import StateStore, replay_records
    h = Harness(store=StateStore(tmp_path))
    h.now = 1.0
    h.call("nm", Call.NODE_HEARTBEAT, [], ("n1", "n2"), 1.0)     # 3 placed for "a"
    for t, left in ((1.0, ()), (2.0, ()), (3.0, ("a",))):
        h.now = t
        h.call("am", Call.ALLOCATE, [], t, AppMark(left))
    h.rm.apps.settle()
    a = h.rm.apps.table["a"]
    # carried by the second mark (sent at 2, the host's 2nd stamped allocate), left out of the
    # third; the 3 containers delivered by the first
    assert (a.last_seen, a.last_sent, a.last_call) == (2.0, 2.0, 2) and a.undelivered == []
    state, records = StateStore(tmp_path).load()     # what a restarted RM reads
    replay_records(state, records)
    state.apps.settle()
    b = state.apps.table["a"]
    assert (b.last_seen, b.last_sent, b.last_call) == (2.0, 2.0, 2) and b.undelivered == []
    assert state.apps.notice == h.rm.apps.notice and state.apps.hosted == h.rm.apps.hosted == {"am": {"a"}}
