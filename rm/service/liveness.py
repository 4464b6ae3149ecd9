"""Liveness that counts only silence the RM could have heard (issue 11).

YARN's NMLivelinessMonitor and AMLivelinessMonitor expire an NM or an AM attempt
silent for ``expiry``.  Measured in wall time, that reads the RM's own slowness as
the others dying: while the RM's loop is blocked (a long GC pause, a slow disk, the
``stall-rm`` fault) or overloaded, calls wait in its queue and nobody's heartbeat is
heard, and after the stall every NM and AM looks silent.  At paper scale on two
cores this turned overload into the failure of every app.

So the RM measures its own lateness.  Its monitor ticks every ``period`` seconds; a
tick that runs L seconds after it was due means the loop could not run anything
for about L seconds (the timer waited behind whatever held the loop, which is also
how long a queued call waited).  ``Stall(t)`` is the total lateness of the ticks up
to wall time t.  The silence the RM could have heard from a caller last heard at
``last_seen`` is

    heard(now) = (now − last_seen) − (Stall(now) − Stall(last_seen))

and a caller expires only when heard(now) > expiry.  A stall of any length thus
expires nobody by itself; after it the callers whose calls were queued get the
whole expiry to be heard again.

Plain Python, no Ray and no clock reads: the RM actor feeds it ``tick(now, planned)``
and asks ``silent_nodes`` / ``silent_apps``; the state applies what it returns
(``expire_nodes`` / ``expire_apps`` with the names, journaled as such).
"""

from __future__ import annotations

import bisect


class Liveness:
    """The RM's lateness over time, and who has been silent for longer than it (module doc)."""

    def __init__(self):
        self._times: list[float] = []      # wall time of each late tick
        self._stall: list[float] = []      # cumulative lateness up to and including it
        self.total = 0.0
        self.last_lag = 0.0

    def tick(self, now: float, planned: float) -> float:
        """The monitor woke at ``now`` for a tick due at ``planned``; returns its lateness."""
        late = max(0.0, now - planned)
        self.last_lag = late
        if late > 0:
            self.total += late
            self._times.append(now)
            self._stall.append(self.total)
        return late

    def stalled_since(self, t: float) -> float:
        """Stall(now) − Stall(t): how long the RM's loop was held up after wall time t."""
        i = bisect.bisect_right(self._times, t)
        return self.total - (self._stall[i - 1] if i else 0.0)

    def heard(self, last_seen: float, now: float) -> float:
        """Silence the RM could have heard since ``last_seen``."""
        return (now - last_seen) - self.stalled_since(last_seen)

    def silent_nodes(self, state, now: float, expiry: float) -> list[str]:
        """Live NMs the RM could have heard for longer than ``expiry`` and did not."""
        return [n for n, r in state.nodes.items()
                if r.alive and now - r.last_seen > expiry and self.heard(r.last_seen, now) > expiry]

    def silent_apps(self, state, now: float, expiry: float) -> list[str]:
        """Current AM attempts the RM could have heard for longer than ``expiry`` and did not."""
        return [a for a, r in state.apps.items()
                if not r.done and now - r.last_seen > expiry and self.heard(r.last_seen, now) > expiry]
