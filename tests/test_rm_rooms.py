"""The RM actor's rooms (rm/runtime/rmactor), without Ray: what its monitor expires, and
its journal's restore."""

from __future__ import annotations

from harness import Harness

from rayrm.rm.service.calls import Call
from rayrm.rm.service.channel import ChannelServer
from rayrm.rm.service.liveness import HOST_FACTOR, Liveness
from rayrm.rm.service.store import StateStore


def test_the_monitor_expires_the_silent_nms_then_their_silent_am():
    from rayrm.rm.runtime.rmactor.expiries import Expiries
    # the harness registers n1, n2 and app a's AM at t = 0 and then says nothing more; with
    # a 10 s expiry a host is silent after HOST_FACTOR × 10 = 300 s: at t = 400 everyone is
    assert HOST_FACTOR * 10.0 == 300.0
    h, expiries = Harness(), Expiries(Liveness(), 10.0, 10.0)
    h.now = 400.0
    applied = []
    for call, args in expiries.due(h.rm, 400.0):             # applied one by one, as the actor does
        applied.append((call, args, h.apply(call, *args)))
    assert applied == [(Call.EXPIRE_NODES, (10.0, ["n1", "n2"]), ["n1", "n2"]),
                       (Call.EXPIRE_APPS, (10.0, ["a"]), ["a"])]
    # 5 s later: nobody left to expire, and the allocation scan (once per 10 s) is not due
    h.now = 405.0
    assert list(expiries.due(h.rm, 405.0)) == []


def test_a_restarted_rm_rebuilds_its_state_from_the_snapshot_and_journal(tmp_path):
    from rayrm.rm.runtime.rmactor.journal import RMJournal
    h = Harness(StateStore(tmp_path))                        # snapshot 1, then 4 records journaled
    for _ in range(3):
        h.step()
    h.store.close()
    restored = RMJournal(StateStore(tmp_path), ChannelServer(None, b"k")).restore()
    assert restored is not None
    state, detail, stats = restored
    # the harness journals the 4 calls of its start and 2 per step (a heartbeat, an allocate)
    assert detail.startswith(f"snapshot 1 + {4 + 3 * 2} journal records replayed in ")
    assert stats["journal_records"] == 10 and stats["snapshot_bytes"] > 0
    assert state.progress(h.now) == h.rm.progress(h.now)
    assert RMJournal(None, ChannelServer(None, b"k")).restore() is None      # no store: a fresh RM
