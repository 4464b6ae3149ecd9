"""The protocol test harness: an NM host and an AM host driving ``ResourceManagerState``
without Ray (like Nomad's ``Harness``).

Cluster: n1 <cpu:2; memory_mb:2048>, n2 <cpu:1; memory_mb:1024; disk=ssd>.
App "a" has 4 tasks of <cpu:1; memory_mb:512>: 2 fit on n1 and 1 on n2, 3 at once.

``Harness`` plays one NM host ("nm") and one AM host ("am"): ``call`` numbers each
caller's requests (``again=True`` repeats the last id, a retry); ``step`` advances
the clock one second, has the NMs report RUNNING and, after ``DURATION`` seconds,
COMPLETE, and has the AM ask for its unplaced tasks and start what it gets.  With a
``StateStore`` every call is journaled, and ``restart`` rebuilds the state from disk.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

from rayrm.rm.core.clock import TraceClock
from rayrm.rm.core.model import AppSpec, NodeSpec, Resources
from rayrm.rm.service.calls import Call
from rayrm.rm.service.protocol import (COMPLETE, FINISHED, KILLED, RESYNC, RUNNING, AllocateRequest, AppRegistration, ContainerStatus, NodeHeartbeat, NodeRegistration)
from rayrm.rm.service.state import ResourceManagerState
from rayrm.rm.service.store import StateStore, replay_records

NODES = [NodeSpec("n1", Resources.parse("cpu:2;memory_mb:2048")),
         NodeSpec("n2", Resources.parse("cpu:1;memory_mb:1024"), {"disk": "ssd"})]
APP = AppSpec("a", Resources.parse("cpu:1;memory_mb:512"), num_tasks=4)
DURATION = 2.0
SECRET = b"0123456789abcdef"


def registration(n: NodeSpec, running=()) -> NodeRegistration:
    return NodeRegistration(n.name, dict(n.capacity), dict(n.attributes), "ray-a", 0, tuple(running))


class Harness:
    """One NM host ("nm") and one AM host ("am") driving the state; optionally journaled.

    ``apps`` register at t = 0; with ``ask`` their AM asks at once for all their tasks.
    """

    def __init__(self, store: StateStore | None = None, apps=(APP,), max_attempts: int = 2,
                 policy: str = "tsf", ask: bool = True, nodes=NODES, preemption=None, queues=None):
        self.store, self.nodes = store, list(nodes)
        self.rm = ResourceManagerState(dims=("cpu", "memory_mb"), nodes=self.nodes, policy=policy,
                                       policy_name=policy, max_attempts=max_attempts,
                                       secret=SECRET, preemption=preemption, queues=queues)
        # with preemption the NM kills what its heartbeat answer lists (cleanup), and the
        # AMs' preemption messages are kept: (time, app, container, deadline)
        self.kills = preemption is not None
        self.warnings: list[tuple[float, str, int, float]] = []
        if store is not None:
            store.snapshot(self.rm)
        self.now, self.rid = 0.0, defaultdict(int)       # caller -> its last request id
        self.apps = {a.app_id: a for a in apps}
        self.attempt = {a: 1 for a in self.apps}
        self.unplaced = {a.app_id: list(range(a.num_tasks)) for a in apps}
        self.running: dict[int, tuple[str, int, str, float]] = {}     # container -> app, task, node, t0
        self.reported: set[int] = set()
        self.unacked: dict[int, ContainerStatus] = {}
        self.finished = {a: set() for a in self.apps}
        self.call("nm", Call.REGISTER_NODES, [registration(n) for n in self.nodes])
        self.apply(Call.START_CLOCK, TraceClock(0.0, 1.0))
        if apps:
            self.call("am", Call.REGISTER_APPS, [AppRegistration(a) for a in apps])
        if apps and ask:
            self.call("am", Call.ALLOCATE, [AllocateRequest(a, 1, len(self.unplaced[a])) for a in self.apps])

    # ----- calls ---------------------------------------------------------------------

    def apply(self, call: Call, *args):
        """One call at ``now``, journaled when there is a store (as the RM actor does)."""
        out = call.apply(self.rm, self.now, *args)
        if self.store is not None:
            self.store.append(call, self.now, args)
        return out

    def call(self, caller: str, call: Call, payload, *extra, again: bool = False):
        """A host's call with its next request id (``again``: the same id, a retry)."""
        if not again:
            self.rid[caller] += 1
        return self.apply(call, caller, self.rid[caller], payload, *extra)

    def beat(self, statuses=(), **kw):
        """One heartbeat of every NM with the given statuses (each to its own node)."""
        beats = [NodeHeartbeat(n.name, tuple(s for s in statuses if s.node == n.name)) for n in self.nodes]
        return self.call("nm", Call.NODE_HEARTBEAT, beats, **kw)

    def allocate(self, ask, releases=(), attempt=1, app="a", **kw):
        return self.call("am", Call.ALLOCATE, [AllocateRequest(app, attempt, ask, tuple(releases))], **kw)[0]

    def restart(self, trusted=()) -> None:
        """The RM dies and comes back from its snapshot and journal (``trusted``: modules
        the snapshot may name besides rayrm's, ``StateStore.load``)."""
        self.store.close()
        store = StateStore(self.store.dir)
        state, records = store.load(trusted)
        replay_records(state, records)
        self.rm, self.store = state, store
        self.apply(Call.RECOVERED, "test", 0.0)

    # ----- the hosts' behaviour, one second at a time ------------------------------------

    def statuses(self) -> list[ContainerStatus]:
        out = list(self.unacked.values())
        for cid, (app, task, node, t0) in self.running.items():
            if cid not in self.reported:
                out.append(ContainerStatus(cid, app, task, 0, node, RUNNING, t0))
        return out

    def step(self, dt: float = 1.0) -> None:
        self.now += dt
        for cid, (app, task, node, t0) in list(self.running.items()):
            if self.now - t0 >= DURATION:
                del self.running[cid]
                self.unacked[cid] = ContainerStatus(cid, app, task, 0, node, COMPLETE, t0, t0, self.now, FINISHED)
        sts = self.statuses()
        answers = self.beat(sts)
        if any(r.action == RESYNC for r in answers):
            self.call("nm", Call.REGISTER_NODES, [registration(n, tuple(
                s for s in self.statuses() if s.node == n.name) + tuple(
                ContainerStatus(c, a, t, 0, nd, RUNNING, t0) for c, (a, t, nd, t0) in self.running.items()
                if nd == n.name and c in self.reported)) for n in self.nodes])
            return
        self.reported |= {s.container for s in sts if s.state == RUNNING}
        for r in answers:
            for cid in r.ack:
                self.unacked.pop(cid, None)
            for cid in r.cleanup if self.kills else ():
                if cid in self.running:                  # an NM kills a container once
                    app, task, node, t0 = self.running.pop(cid)
                    self.unacked[cid] = ContainerStatus(cid, app, task, 0, node, COMPLETE, t0, t0, self.now, KILLED)
        reqs = [AllocateRequest(a, self.attempt[a], len(self.unplaced[a])) for a in self.apps]
        for resp in self.call("am", Call.ALLOCATE, reqs):
            if resp.action == RESYNC:
                self.call("am", Call.REGISTER_APPS, [AppRegistration(self.apps[resp.app], self.attempt[resp.app])])
                continue
            if resp.preemption is not None:
                self.warnings += [(self.now, resp.app, cid, t) for cid, t in resp.preemption.containers]
            for st in resp.completed:
                if st.exit == FINISHED:
                    self.finished[st.app].add(st.task)
                else:
                    self.unplaced[st.app].insert(0, st.task)
            for a in resp.allocated:
                task = self.unplaced[a.app].pop(0)
                self.running[a.container] = (a.app, task, a.node, self.now)

    def run(self, until: float) -> None:
        while self.now < until:
            self.step()


def running(alloc, task, t):
    """The RUNNING status an NM reports for ``alloc`` running ``task`` since ``t``."""
    return ContainerStatus(alloc.container, alloc.app, task, 0, alloc.node, RUNNING, t)


def complete(alloc, task, t0, t1, exit_=FINISHED):
    return ContainerStatus(alloc.container, alloc.app, task, 0, alloc.node, COMPLETE, t0, t0, t1, exit_)


def digest(rm: ResourceManagerState) -> str:
    """Everything observable about the state, hashed: containers, apps, the run log, answers."""
    view = (sorted((c.container, c.app, c.node, c.state, c.task, c.attempt) for c in rm.containers.table.values()),
            sorted((a, r.attempt, sorted(r.finished_tasks), r.done) for a, r in rm.apps.table.items()),
            sorted(map(tuple, rm.log.tasks.values())), list(rm.log.events), rm.records.allocations,
            sorted((k, repr(v)) for k, v in rm.responses.items()))
    return hashlib.sha256(repr(view).encode()).hexdigest()


def kinds(rm, kind: str) -> list[tuple]:
    """The run log's events of one kind."""
    return [e for e in rm.log.events if e[2] == kind]
