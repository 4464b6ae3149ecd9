"""What the ResourceManager records of the run (a part of ``ResourceManagerState``).

The run log on the trace clock (tasks, events, shares, nodes, jobs: ``rayrm.rm.runs.log``),
the RM's counters, and which apps need a share row at the end of the call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rayrm.rm.core.clock import TraceClock
from rayrm.rm.core.fault_rules import Resync
from rayrm.rm.core.shares import app_shares
from rayrm.rm.runs.log import RunLog
from rayrm.rm.service.records import AppRecord


@dataclass(eq=False, slots=True)
class RunRecords:
    """The run log, the clock that stamps it, the counters and the share rows to write.

    Contract: wall times (``now``, read by the actor) become trace times on the replay's
    ``clock`` (``TraceClock.trace``), 0 before it starts (``start_clock``: t = 0 of the
    replay); every row the RM writes goes through ``log`` with both times.  An app
    ``touched`` in a call (its running count or h_i may have changed; ``touched_all``
    after nodes joined or left) gets exactly one share row, at the end of the call
    (``shares``), never at a trace time before the previous one.
    """

    log: RunLog
    clock: TraceClock | None = None
    total_tasks: int = 0                 # tasks of the apps accepted
    finished: int = 0                    # tasks finished (once each)
    allocations: int = 0                 # containers placed
    heartbeats: int = 0                  # NM heartbeats handled
    duplicate_finishes: int = 0          # a task reported finished again (must stay 0)
    refused: int = 0                     # calls and statuses refused (fencing)
    alloc_to_running: list[float] = field(default_factory=list)   # wall s, payload start - allocation
    alloc_to_launch: list[float] = field(default_factory=list)    # wall s, NM launch - allocation
    touched: set[str] = field(default_factory=set)
    touched_all: bool = False
    last_share_time: float = 0.0

    def trace(self, now: float) -> float:
        """The trace time of wall time ``now``; 0 before the clock starts."""
        return 0.0 if self.clock is None else self.clock.trace(now)

    def wall(self, now: float) -> float:
        """Wall seconds since t = 0; 0 before the clock starts."""
        return 0.0 if self.clock is None else self.clock.elapsed(now)

    def event(self, now: float, kind: str, **where) -> None:
        """An events.csv row of ``kind`` at ``now``."""
        self.log.event(kind, self.trace(now), self.wall(now), **where)

    def refuse(self, now: float, kind: str, **where) -> None:
        """Fencing: a call was refused; counted and logged (``refused`` or ``fenced``)."""
        self.refused += 1
        self.event(now, kind, **where)

    def resynced(self, resync: Resync, now: float) -> None:
        """``rm_resynced`` once the restarted RM waits for nobody (``fault_rules.Resync``)."""
        detail = resync.check(now)
        if detail is not None:
            self.event(now, "rm_resynced", detail=detail)

    def touch_all(self) -> None:
        """Nodes joined or left: every app's h (and so its shares) may have changed
        (expanded once, in ``shares``, however many nodes changed in the call)."""
        self.touched_all = True

    def shares(self, now: float, cluster, apps: dict[str, AppRecord]) -> None:
        """Log share rows for apps whose running count or h changed (shares.csv)."""
        if self.touched_all:
            self.touched.update(a for a, r in apps.items() if not r.done)
            self.touched_all = False
        if not self.touched or self.clock is None:
            return
        t = max(self.trace(now), self.last_share_time)
        self.last_share_time = t
        for app_id in sorted(self.touched):
            state = cluster.apps.get(app_id)
            if state is None:
                self.log.share(t, app_id, (0.0, 0.0, 0.0, 0.0), 0)
            else:
                self.log.share(t, app_id, app_shares(state, cluster), state.running)
        self.touched.clear()
