"""The replay's trace clock (rm/core/clock.py): wall = start + t × scale."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from rayrm.rm.core.clock import TraceClock


def test_trace_and_wall_times_convert_both_ways():
    # t = 0 at wall 1000 s, a quarter wall second per trace second (values exact in binary)
    clock = TraceClock(1000.0, 0.25)
    assert clock.wall(8.0) == 1002.0                 # 1000 + 8 × 0.25
    assert clock.trace(1002.0) == 8.0                # (1002 − 1000) / 0.25
    assert clock.trace(999.0) == 0.0                 # before t = 0: t = 0
    assert clock.elapsed(1002.5) == 2.5              # 1002.5 − 1000 wall seconds since t = 0
    assert clock.wall_seconds(10.0) == 2.5           # a 10 s task runs 10 × 0.25 wall seconds
    assert clock.trace_seconds(2.5) == 10.0          # and 2.5 wall seconds are 10 trace seconds


def test_a_clock_is_a_value_that_crosses_actor_boundaries():
    clock = TraceClock(1000.0, 0.25)
    assert pickle.loads(pickle.dumps(clock)) == clock
    with pytest.raises(dataclasses.FrozenInstanceError):
        clock.start = 0.0                            # type: ignore[misc]
    with pytest.raises(ValueError, match="runs forward"):
        TraceClock(1000.0, 0.0)


def test_the_rm_stamps_its_run_log_on_the_clock_it_is_given():
    from harness import NODES

    from rayrm.rm.service.calls import Call
    from rayrm.rm.service.state import ResourceManagerState
    state = ResourceManagerState(dims=("cpu", "memory_mb"), nodes=NODES, policy="tsf", policy_name="tsf")
    assert state.clock is None and state.records.trace(5.0) == 0.0      # no clock yet: t = 0
    Call.START_CLOCK.apply(state, 100.0, TraceClock(100.0, 0.5))
    Call.FAULT.apply(state, 104.0, "driver", 1, "kill-nm:n1@8", "n1", "")
    # wall 104 on a clock started at 100, half a wall second per trace second: t = 4 / 0.5 = 8
    assert state.log.events[-1][:3] == (8.0, 4.0, "fault")
