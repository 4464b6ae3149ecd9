"""An NM host's heartbeat slots: its NMs dealt into groups that beat together.

A host's NMs are dealt into interval / ``window`` slots (default ten per interval, none
narrower than ``MIN_BATCH_WINDOW`` wall seconds: a call costs the RM and the host work
whatever it carries), slot k of K first due at now + interval × (k + 0.5) / K, so the
phases spread over the interval.  A slot's NMs beat in one call and the host's loop pops
one heap entry per slot, not per NM: at 1,000 NMs and 0.02 s intervals that is the
difference between 500 and 50,000 entries a wall second.  A slot that falls behind keeps
its phase and skips the beats it missed.
"""

from __future__ import annotations

import heapq

#: the narrowest heartbeat slot, wall seconds (module docstring)
MIN_BATCH_WINDOW = 0.005


def slot_count(n: int, interval: float, window: float | None = None) -> int:
    """How many heartbeat slots ``n`` NMs beating every ``interval`` wall seconds are
    dealt into: interval / window, window = max(interval / 10, MIN_BATCH_WINDOW) unless
    given (one slot per NM when it is 0), at least 1 and at most ``n``."""
    if window is None:
        window = max(interval / 10, MIN_BATCH_WINDOW)
    if n <= 0:
        return 0
    return n if window <= 0 else max(1, min(n, round(interval / window)))


class HeartbeatSlots:
    """The slots of one dealing (module docstring): each slot's NM names and when it is
    next due, and a heap of (due, slot) whose entries are stale once the slot's due time
    moved on.  Dealing again (``deal``) makes a new object; a loop still holding the old
    one reschedules into it harmlessly."""

    __slots__ = ("interval", "window", "names", "due", "heap")

    def __init__(self, interval: float, window: float):
        self.interval, self.window = interval, window
        self.names: list[list[str]] = []        # slot -> its NMs (they beat together)
        self.due: list[float] = []              # slot -> when it is next due
        self.heap: list[tuple[float, int]] = []

    @classmethod
    def deal(cls, names: list[str], now: float, interval: float, window: float, nms: dict) -> "HeartbeatSlots":
        """``names`` over ``slot_count`` slots, slot k due at now + interval × (k + 0.5) / K."""
        slots = cls(interval, window)
        n = len(names)
        if n:
            k = slot_count(n, interval, window)
            for j in range(k):
                slots.add(names[j * n // k:(j + 1) * n // k], now + interval * (j + 0.5) / k, nms)
        return slots

    def add(self, names: list[str], due: float, nms: dict) -> None:
        """A new slot of ``names`` (each NM of ``nms`` learns its slot), first due at ``due``."""
        sid = len(self.names)
        self.names.append(list(names))
        self.due.append(due)
        for name in names:
            nms[name].slot = sid
        heapq.heappush(self.heap, (due, sid))

    def next_due(self) -> float | None:
        """When the earliest slot is due (None: no slot)."""
        return self.heap[0][0] if self.heap else None

    def take(self, until: float) -> dict[int, float]:
        """Slot -> due time of every slot due by ``until``, out of the heap until rescheduled."""
        heap, due, out = self.heap, self.due, {}
        while heap and heap[0][0] <= until:
            t, sid = heapq.heappop(heap)
            if due[sid] == t:                      # else a stale entry
                out[sid] = t
        return out

    def beats(self, slots) -> int:
        """How many NM beats ``slots`` hold."""
        names = self.names
        return sum(len(names[sid]) for sid in slots)

    def reschedule(self, taken: dict[int, float], now: float) -> None:
        """Each slot taken is next due one interval after it was; one that fell behind
        ``now`` keeps its phase and skips the beats it missed."""
        interval = self.interval
        for sid, t in taken.items():
            nxt = t + interval
            if nxt < now:
                nxt += interval * int((now - nxt) / interval + 1)
            self.due[sid] = nxt
            heapq.heappush(self.heap, (nxt, sid))
