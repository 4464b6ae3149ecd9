"""What the RM's monitor decides about preemption (``Preemptions``, rm/service/containers.py): the victims
the rules choose now, warned, and the warned containers whose deadline has passed, killed.

The rules are clock-free (rm/core) and the simulator's too; this room asks them at the
monitor's tick, on the RM's wall clock read as trace time, and yields the calls that apply
what they decided, which the actor applies and journals in order (as ``Expiries``).  With
preemption off (no rules) it yields nothing and costs one attribute read per tick.
"""

from __future__ import annotations

from typing import Iterator

from rayrm.rm.service.calls import Call
from rayrm.rm.service.state import ResourceManagerState


def preemption_due(state: ResourceManagerState, now: float) -> Iterator[tuple[Call, tuple]]:
    """The preemption calls due at wall time ``now``: warnings first, then the kills due."""
    p = state.preemptions
    if p.rules is None:
        return
    victims = p.decide(now, state.scheduler)
    if victims:
        yield Call.PREEMPT, (victims,)
    due = p.due(now)
    if due:
        yield Call.KILL_PREEMPTED, (due,)
