"""Liveness that counts only silence the RM could have heard (issue 11).

YARN's NMLivelinessMonitor and AMLivelinessMonitor expire an NM or an AM attempt
silent for ``expiry``.  Measured in wall time, that reads slowness as death: while
the RM's loop is blocked (a long GC pause, a slow disk, the ``stall-rm`` fault) or
overloaded, calls wait in its queue and nobody is heard, and on a busy machine a
host may be slow to send.  At paper scale on two cores this turned overload into
the failure of every app.  Two rules replace it.

**Relative to the host.**  Every NM and AM lives in a host actor that makes the
calls (one in flight at a time).  The RM notes when it applied each host's latest
call (``caller_seen``).  If the host's calls went on for more than ``expiry``
without a word from one of its NMs (or AMs), that one is silent: its host could
send and chose not to — the NM crashed (``kill-nm``) or the AM did (``kill-am``).
Queueing in the RM, an RM stall, or a slow host delay all its calls alike and
expire nobody.

**The host itself silent.**  A host that makes no call at all (it hung, or has
nothing active) is judged on the RM's own clock with its stalls taken out.  The
monitor ticks every ``period``; a tick that runs L seconds late means the loop
could run nothing for about L seconds (a queued call waited as long).  With
Stall(t) the total lateness up to wall time t, the silence the RM could have heard
since ``last_seen`` is

    heard(now) = (now − last_seen) − (Stall(now) − Stall(last_seen))

and a caller whose host is also silent expires when heard(now) > expiry and its
host's heard silence exceeds ``HOST_FACTOR`` × expiry.  (A host that died is
noticed at once anyway: the driver holds a call open on it.)

Plain Python, no Ray and no clock reads: the RM actor feeds it ``tick(now, planned)``
and asks ``silent_nodes`` / ``silent_apps``; the state applies what they return
(``expire_nodes`` / ``expire_apps`` with the names, journaled as such).
"""

from __future__ import annotations

import bisect

#: a caller whose host is silent too expires only once the host has been silent this many expiries
HOST_FACTOR = 5.0


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

    def _silent(self, last_seen: float, host_seen: float | None, now: float, expiry: float) -> bool:
        if now - last_seen <= expiry:
            return False
        if host_seen is not None and host_seen - last_seen > expiry:
            return True                  # its host kept calling without it
        host = last_seen if host_seen is None else host_seen
        return self.heard(last_seen, now) > expiry and self.heard(host, now) > HOST_FACTOR * expiry

    def silent_nodes(self, state, now: float, expiry: float) -> list[str]:
        """Live NMs silent for longer than ``expiry`` by the rules of the module docstring."""
        seen = state.caller_seen
        return [n for n, r in state.nodes.items()
                if r.alive and self._silent(r.last_seen, seen.get(r.host), now, expiry)]

    def silent_apps(self, state, now: float, expiry: float) -> list[str]:
        """Current AM attempts silent for longer than ``expiry`` (module docstring)."""
        seen = state.caller_seen
        return [a for a, r in state.apps.items()
                if not r.done and self._silent(r.last_seen, seen.get(r.host), now, expiry)]
