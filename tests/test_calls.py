"""The RM's table of calls (rm/service/calls.py) and what derives from it: the client, the
channel's allow-list, the journal and the actor's one pass-through."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from harness import APP, NODES, SECRET, Harness, registration

from rayrm.rm.core.clock import TraceClock
from rayrm.rm.service.calls import DRIVER_CALLS, HOST_CALLS, By, Call
from rayrm.rm.service.channel import CALLS
from rayrm.rm.service.client import RMClient
from rayrm.rm.service.protocol import AllocateRequest, AppMark, AppRegistration, NodeHeartbeat
from rayrm.rm.service.state import ResourceManagerState
from rayrm.rm.service.store import StateStore, read_journal, replay_records


def test_every_call_is_named_by_its_handler_which_takes_now_first():
    for call in Call:
        handler = getattr(ResourceManagerState, call.value)
        assert call.spec.handler is handler and call.value == handler.__name__, call
        assert list(inspect.signature(inspect.unwrap(handler)).parameters)[:2] == ["self", "now"], call
        assert Call(call.value) is call             # a journal record's name finds its row


def test_who_may_make_each_call():
    # the hosts: their five numbered calls and lose_node (an NM leaving: idempotent by itself)
    assert CALLS == set(HOST_CALLS) == {"register_nodes", "node_heartbeat", "register_apps", "allocate",
                                        "finish_apps", "lose_node"}
    assert [c.value for c in HOST_CALLS.values() if not c.spec.numbered] == ["lose_node"]
    # the driver: lose_node too (an NM host gone for good), and the faults and the clock
    assert {c.value for c in DRIVER_CALLS} == {"lose_node", "lose_host", "lose_am_host", "fault", "start_clock"}
    # the RM itself: its monitor's expiries and preemption tick, its restart and the long poll's second half
    assert {c.value for c in Call if c.spec.by == By.RM} == {"poll", "expire_nodes", "expire_apps",
                                                             "expire_allocations", "recovered", "preempt"}
    # every application is journaled but a poll's, journaled only when it delivers
    assert [c for c in Call if not c.spec.journaled] == [Call.POLL]


def test_the_client_has_each_host_call_with_its_handlers_arguments():
    # the client fills in who calls (caller, request_id) and when it sends (sent)
    for name, call in HOST_CALLS.items():
        filled = {"caller", "request_id", "sent"}
        want = [(p.name, p.default) for p in call.spec.parameters if p.name not in filled]
        params = list(inspect.signature(getattr(RMClient, name)).parameters.values())[1:]
        assert [(p.name, p.default) for p in params] == want, name


def _actor(tmp_path, monkeypatch):
    """The RM actor's class, built without Ray, journaling into ``tmp_path``."""
    from rayrm.rm.runtime import actor  # noqa: PLC0415 - Ray is imported with the actor
    monkeypatch.setattr(actor, "quiet_gc", lambda: None)       # leave this process's collector alone
    cls = actor.ResourceManager.__ray_metadata__.modified_class
    return cls(dims=("cpu", "memory_mb"), nodes=NODES, policy="tsf", policy_name="tsf", time_scale=1.0,
               heartbeat_interval=1.0, nm_expiry=10, state_dir=str(tmp_path), secret=SECRET, metrics=False)


def test_the_actor_applies_and_journals_every_call_through_one_pass_through(tmp_path, monkeypatch):
    rm = _actor(tmp_path, monkeypatch)

    async def calls():
        await rm.serve(Call.REGISTER_NODES, "nm", 1, [registration(n) for n in NODES])
        await rm.call(Call.START_CLOCK, TraceClock(0.0, 1.0))
        await rm.serve(Call.REGISTER_APPS, "am", 1, [AppRegistration(APP)])
        await rm.serve(Call.ALLOCATE, "am", 2, [AllocateRequest("a", 1, 4)], 0.0, AppMark())
        beat = await rm.serve(Call.NODE_HEARTBEAT, "nm", 2, [NodeHeartbeat(n.name) for n in NODES])
        got = await rm.serve(Call.ALLOCATE, "am", 3, [AllocateRequest("a", 1, 4)], 0.0, AppMark())
        await rm.call(Call.FAULT, "driver", 1, "kill-nm:n2@1", "n2", "")
        lost = await rm.call(Call.LOSE_NODE, "n2", "test")
        return beat, got, lost
    beat, got, lost = asyncio.run(calls())
    # n1 <cpu:2> takes 2 of a's tasks <cpu:1> and n2 <cpu:1> one: 3 containers, n2's lost
    assert len(got[0].allocated) == 3 and len(lost) == 1 and [b.node for b in beat] == ["n1", "n2"]
    records = list(read_journal(tmp_path / "journal-1.log"))
    assert [r[0] for r in records] == ["register_nodes", "start_clock", "register_apps", "allocate",
                                       "node_heartbeat", "allocate", "fault", "lose_node"]
    assert records[-1][2] == ("n2", "test")            # the arguments as the call took them
    # the journal replayed onto the first snapshot is the state the actor holds
    state, journal = StateStore(tmp_path).load()
    replay_records(state, journal)
    assert state.progress(0.0) == rm.state.progress(0.0)
    assert rm.calls == 8


def test_the_driver_cannot_make_the_hosts_or_the_rms_own_calls(tmp_path, monkeypatch):
    rm = _actor(tmp_path, monkeypatch)
    for call in (Call.ALLOCATE, Call.EXPIRE_NODES, Call.RECOVERED):
        with pytest.raises(ValueError, match="the driver makes no call"):
            asyncio.run(rm.call(call, "driver", 1))
    assert rm.calls == 0


def test_the_harness_and_the_actor_journal_the_same_records(tmp_path):
    # the protocol harness journals as the actor does: (call name, now, the arguments)
    h = Harness(StateStore(tmp_path))
    h.store.close()
    records = list(read_journal(tmp_path / "journal-1.log"))
    assert [r[0] for r in records] == ["register_nodes", "start_clock", "register_apps", "allocate"]
    assert records[1] == ("start_clock", 0.0, (TraceClock(0.0, 1.0),))
