"""The simulator's event queue: events ordered by (time, priority, push order).

Equal times resolve by priority (``rayrm.rm.sim.engine``: completions first, then faults,
leaves, joins, arrivals), then by the order events were pushed, so the order is total
and a run is a pure function of its config and seed.  ``EventHeap`` here is the Python
reference (``heapq`` over (t, priority, sequence, payload) tuples); the compiled core's
``rayrm.rm.core.native._eventheap.EventHeap`` keeps the same order in a C array of structs, so
no tuple is built or compared per event.  ``event_heap()`` returns the one the selected
core uses (``rayrm.rm.core.native``).
"""

from __future__ import annotations

import heapq
import itertools

from rayrm.rm.core.native import core_name, native_module


class EventHeap:
    """A min-heap of events keyed (t, priority, push order)."""

    __slots__ = ("_heap", "_seq")

    def __init__(self):
        self._heap: list[tuple] = []
        self._seq = itertools.count()

    def push(self, t: float, priority: int, payload) -> None:
        heapq.heappush(self._heap, (t, priority, next(self._seq), payload))

    def pop(self) -> tuple:
        """The earliest event as (t, priority, payload); IndexError when empty."""
        t, priority, _, payload = heapq.heappop(self._heap)
        return t, priority, payload

    def first_time(self) -> float:
        """The earliest event's time; inf when empty."""
        return self._heap[0][0] if self._heap else float("inf")

    def __len__(self) -> int:
        return len(self._heap)


def event_heap(core: str | None = None):
    """An empty event queue of ``core`` ('python' or 'native'; default: the selected core)."""
    if (core or core_name()) == "native":
        return native_module().EventHeap()
    return EventHeap()
