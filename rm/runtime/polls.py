"""The AM hosts' long polls the RM holds: ``allocate`` with ``wait > 0`` and nothing to deliver.

One poll per AM host at a time (a host's calls to ``allocate`` follow one another).  A
poll ends when the RM has news for one of the host's apps (``wake``: a NODE_UPDATE
placed or completed a container of theirs) or when its ``wait`` is up.  A wait of a
heartbeat interval or more is ended by the monitor tick nearest its end (``end``, from
``Ticker``: a wake-up the RM has anyway, rm/runtime/ticker.py), so an idle AM host's
polls cost the RM no wake-up of their own, and a timer one interval later is only the
backstop.  A shorter wait — the host's next job is due sooner — ends on its own timer, on
time, so no job registers late for it.
"""

from __future__ import annotations

import asyncio

from rayrm.rm.runtime.ticker import Ticker


class LongPolls:
    """The held polls by AM host (module docstring)."""

    def __init__(self):
        self._events: dict[str, asyncio.Event] = {}
        self._ends: dict[str, float] = {}         # host -> when its poll's wait is up (ended by a tick)

    async def hold(self, caller: str, now: float, wait: float, ticker: Ticker | None) -> None:
        """Hold ``caller``'s poll, made at ``now``, for at most about ``wait`` seconds."""
        event = self._events.setdefault(caller, asyncio.Event())
        event.clear()
        if ticker is not None and wait >= ticker.period:
            self._ends[caller] = now + wait
            wait += ticker.period
        # a timer sets the event when nothing else does: no task and no exception per poll
        timer = asyncio.get_running_loop().call_later(wait, event.set)
        try:
            await event.wait()
        finally:
            timer.cancel()
            self._ends.pop(caller, None)

    def wake(self, hosts) -> None:
        """The RM has news for apps of these AM hosts: their polls end now."""
        for host in hosts:
            event = self._events.get(host)
            if event is not None:
                event.set()

    def end(self, by: float) -> None:
        """End the polls whose wait is up by wall time ``by`` (a tick; ``inf``: every one)."""
        if self._ends:
            self.wake([host for host, end in self._ends.items() if end <= by])
