"""Preemption's turn at the RM's monitor tick (``Preemptions``, rm/service/containers.py).

With preemption on, every tick applies the RM's own call ``preempt``: the clock-free rules
of rm/core (the simulator's too) decide on the RM's wall clock read as trace time, the new
victims are warned and those whose deadline has passed are killed.  The call is journaled
every tick, since the rules' starvation clocks move at each decision and a restored RM
must have the same clocks (``rayrm check --restores`` compares them field by field): a
record of a few dozen bytes per tick.  With preemption off there is no call and no record.
"""

from __future__ import annotations

from typing import Iterator

from rayrm.rm.service.calls import Call
from rayrm.rm.service.state import ResourceManagerState


def preemption_due(state: ResourceManagerState, now: float) -> Iterator[tuple[Call, tuple]]:
    """The preemption call due at wall time ``now``: one per tick when preemption is on."""
    if state.preemptions.rules is not None and state.records.clock is not None:
        yield Call.PREEMPT, ()
