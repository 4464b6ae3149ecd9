"""An injected preemption decision for Ray replays (tests/test_preemption_replay.py): the
rules' API, ``decide(now, scheduler) -> victims``, with a fixed answer.  A module of its
own so that it can travel to the RM actor's Ray worker (``py_modules``) as a policy plugin
does, and its objects pickle into the RM's snapshots by reference."""

from __future__ import annotations

from typing import NamedTuple


class Victim(NamedTuple):
    container: int
    app: str
    source: str
    starved: str
    deadline: float


class Newest:
    """At the first decision at or after trace time ``at``, the ``count`` newest containers
    of ``app`` (from ``source`` for ``starved``), killed ``grace`` seconds later; nothing else."""

    def __init__(self, at: float, app: str, count: int, grace: float, source: str = "root.a",
                 starved: str = "root.b"):
        self.at, self.app, self.count, self.grace, self.done = at, app, count, grace, False
        self.source, self.starved = source, starved

    def decide(self, now, scheduler):
        if self.done or now < self.at:
            return []
        self.done = True
        mine = sorted(c.container_id for c in scheduler.cluster.containers.values() if c.app_id == self.app)
        return [Victim(cid, self.app, self.source, self.starved, now + self.grace) for cid in mine[-self.count:]]
