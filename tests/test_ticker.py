"""The RM monitor's schedule (``Ticker``) and the long polls its ticks end (``LongPolls``); no Ray."""

import asyncio
import types

from rayrm.rm.runtime import ticker as ticker_module
from rayrm.rm.runtime.polls import LongPolls
from rayrm.rm.runtime.ticker import Ticker


class Clock:
    """A wall clock the test sets (the ticker reads ``time.time``)."""

    def __init__(self, t: float):
        self.t = t

    def time(self) -> float:
        return self.t


def test_a_tick_runs_on_the_first_call_in_its_window_and_keeps_the_grid(monkeypatch):
    clock = Clock(100.0)
    monkeypatch.setattr(ticker_module, "time", types.SimpleNamespace(time=clock.time))
    ticks = []

    async def run():
        t = Ticker(0.02, 0.01, lambda now, planned: ticks.append((now, planned)))
        # due 100.02, its window [100.01, 100.03]: a call at 100.005 is too early
        clock.t = 100.005
        t.nudge()
        assert ticks == []
        # a call at 100.012 runs it; lateness is measured from the window's end, 100.03,
        # so it is on time; the next is due 100.02 + 0.02 = 100.04, window from 100.03
        clock.t = 100.012
        t.nudge()
        clock.t = 100.025
        t.nudge()
        clock.t = 100.031
        t.nudge()
        # the loop held past the window: at 100.2 the tick due 100.06 runs late by
        # 100.2 − (100.06 + 0.01) = 0.13, and the grid starts again from then:
        # max(100.06, 100.2 − 0.01) + 0.02 = 100.21
        clock.t = 100.2
        t.nudge()
        due = t.due
        t.stop()
        return due

    due = asyncio.run(run())
    assert [(round(n, 3), round(p, 3)) for n, p in ticks] == [(100.012, 100.03), (100.031, 100.05), (100.2, 100.07)]
    assert round(due, 3) == 100.21
    assert round(ticks[-1][0] - ticks[-1][1], 3) == 0.13


def test_with_no_call_the_timer_ticks():
    async def run():
        ticks, fifth = [], asyncio.Event()

        def tick(now, planned):
            ticks.append(planned)
            if len(ticks) == 5:
                fifth.set()

        t = Ticker(0.005, 0.0025, tick)
        await asyncio.wait_for(fifth.wait(), 5.0)
        t.stop()
        return ticks

    ticks = asyncio.run(run())
    # each planned time is one period after the one before it (or later, if the loop was held)
    assert all(b - a >= 0.005 - 1e-9 for a, b in zip(ticks, ticks[1:]))


def test_a_long_poll_ends_at_the_tick_near_its_end_a_short_one_on_its_timer():
    async def run():
        polls = LongPolls()
        period = 0.5
        ticker = types.SimpleNamespace(period=period)
        # a wait of at least a period is ended by a tick (its backstop timer is 20 s away)
        long = asyncio.create_task(polls.hold("am-0", 1000.0, 19.5, ticker))
        await asyncio.sleep(0)
        polls.end(1000.0 + 19.4)             # its wait is not up by then: still held
        await asyncio.sleep(0)
        assert not long.done()
        polls.end(1000.0 + 19.5)
        await asyncio.wait_for(long, 1.0)
        # news ends a poll at once
        news = asyncio.create_task(polls.hold("am-1", 1000.0, 19.5, ticker))
        await asyncio.sleep(0)
        polls.wake({"am-1"})
        await asyncio.wait_for(news, 1.0)
        # a wait shorter than a period (a job due sooner) is not left to the ticks
        short = asyncio.create_task(polls.hold("am-2", 1000.0, 0.2, ticker))
        await asyncio.sleep(0)
        polls.end(float("inf"))
        await asyncio.sleep(0)
        assert not short.done()
        await asyncio.wait_for(short, 1.0)

    asyncio.run(run())
