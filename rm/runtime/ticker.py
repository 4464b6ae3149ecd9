"""The RM monitor's schedule: one tick per heartbeat interval, run on a wake-up the RM has anyway.

A process that sleeps between events pays for each wake-up, and more the longer it slept
(an asyncio loop woken after tens of milliseconds asleep spends more CPU waking than
answering an empty call; docs/results-replay.md, "Waking an asyncio loop").  Once the last
job of a trace has arrived, the RM does little but answer heartbeats, so a monitor on its
own timer would be one more wake-up per heartbeat interval beside the NM hosts' calls and
the AM hosts' long polls; riding on those calls, it costs none of its own.

So a tick is due at ``due`` and runs at the first wake-up within ``slack`` of it: a
protocol call handled in ``[due − slack, due + slack]`` runs it (``nudge``), and a timer
at ``due + slack`` runs it when no call came.  The next tick is due one period after
this one was (``max(due, now − slack) + period``): one tick per period on average, and a
loop held up past the window starts the grid again from when it ran, as a sleeping
loop's timer would.

A tick's lateness — what the pace meter and the liveness rules count as the RM's own
stall (``rm/runtime/pace.py``, ``rm/service/liveness.py``) — is measured from the end of
its window, ``due + slack``: a tick run inside the window is on time, and one run later
is late by what the loop's work held it past the timer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Ticker:
    """Calls ``tick(now, planned)`` once per ``period`` (module docstring); ``planned`` is
    the end of the tick's window, so ``max(0, now − planned)`` is its lateness."""

    def __init__(self, period: float, slack: float, tick: Callable[[float, float], None]):
        self.period, self.slack, self._tick = period, slack, tick
        self.due = time.time() + period
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._arm()

    def nudge(self) -> None:
        """The loop is awake for a call: run the tick now if its window has opened."""
        now = time.time()
        if now >= self.due - self.slack:
            self._run(now)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self) -> None:
        # the loop's clock is monotonic, the schedule is in wall time: convert the delay
        delay = self.due + self.slack - time.time()
        self._timer = self._loop.call_later(max(0.0, delay), self._fired)

    def _fired(self) -> None:
        self._timer = None
        self._run(time.time())

    def _run(self, now: float) -> None:
        planned = self.due + self.slack
        self.due = max(self.due, now - self.slack) + self.period
        self.stop()
        self._arm()          # before the tick: a tick that raises still leaves the next one armed
        self._tick(now, planned)
