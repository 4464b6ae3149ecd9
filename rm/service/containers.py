"""The containers the ResourceManager placed, and their life (a part of ``ResourceManagerState``).

A container is ALLOCATED (placed, not yet given to its AM), ACQUIRED (delivered), RUNNING
(its NM launched it), then COMPLETE (finished, failed, killed or lost) — or RELEASED (given
back, or withdrawn before it ran).  What its node's loss does to it is
``fault_rules.fate_on_node_lost``; fencing of the statuses an NM reports is here too (an NM
reports only containers the RM placed on it, for their own app).

``Preemptions`` are the containers the RM takes back: it warns the AM, then the NM kills
the container at the deadline.  YARN's way (the Fair Scheduler's FSPreemptionThread, the Capacity Scheduler's
ProportionalCapacityPreemptionPolicy; docs/design.md, "Preemption in the replay"): the preemption rules
(``rules``, clock-free, in ``rm/core``, the simulator's too) choose victims with a
deadline, ``decide``; the RM then

1. **tells the AM first** (``warn``, the journaled call ``preempt``): each victim goes into
   its app's next ``AllocateResponse`` as a ``PreemptionMessage`` (a
   ``StrictPreemptionContract``: containers and their deadline).  The AM host logs it and
   goes on; YARN's AMs mostly ignore it too;
2. **kills at the deadline** (``kill``, in the same call at a later tick): a victim still
   RUNNING goes on its node's ``cleanup`` (YARN's containersToCleanup in the NM's heartbeat
   answer); one its AM never started is given up as a lost node's would be
   (``Containers.lose``).  A victim that finished first is not killed: its finish counts
   (``spared``).  A killed container's COMPLETE status ends its attempt ``preempted``
   (``ended``) and the AM asks for the task again, a new attempt.

Both steps happen in one call of the RM's table, its own at each monitor tick, journaled
like every other, so the rules' bookkeeping (how long a queue has starved) and the warned
containers with their deadlines are a function of the journal: an RM restart between the
warning and the kill neither loses nor doubles a kill.  The restored ``table`` still holds
every warned container and its deadline, and ``resend`` puts each kill already issued and
not yet confirmed back on its node's cleanup list, which the NM host applies once per
container (``HostContainers.kill``); a container warned once is never warned again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from rayrm.rm.core.fault_rules import Fate, LateStatus, fate_on_node_lost, late_status_detail, on_late_status
from rayrm.rm.core.scheduler import OnlineScheduler
from rayrm.rm.service.protocol import COMPLETE, FINISHED, KILLED, LOST, PREEMPTED, RUNNING, ContainerStatus
from rayrm.rm.service.records import ACQUIRED, ALLOCATED, RELEASED, AppRecord, ContainerRecord, NodeRecord
from rayrm.rm.service.runrecords import RunRecords


@dataclass(eq=False, slots=True)
class Containers:
    """Every container by id, the live ones by app and by node, and the RUNNING count.

    Contract: ``by_app`` and ``by_node`` hold exactly the live containers (neither COMPLETE
    nor RELEASED), so failing an app, losing a node or a resync reads only their own, never
    the whole ``table``; ``running`` counts the RUNNING ones.  A container that ends gives
    its resources back to the scheduler, and its app hears of it: a COMPLETE status in
    ``AppRecord.completed``, the app in its AM host's ``notice`` and the host in ``news``
    (``tell``).  ``apps``, ``news`` and ``notice`` are the ``AppMasters``' own (shared, not
    copied).
    """

    scheduler: OnlineScheduler = field(repr=False)
    records: RunRecords = field(repr=False)
    apps: dict[str, AppRecord] = field(repr=False)
    news: set[str] = field(repr=False)           # AM hosts with something to deliver (wakes long polls)
    notice: dict[str, set[str]] = field(repr=False)   # AM host -> its apps the RM has news for
    table: dict[int, ContainerRecord] = field(default_factory=dict)
    by_app: dict[str, set[int]] = field(default_factory=dict)
    by_node: dict[str, set[int]] = field(default_factory=dict)
    running: int = 0
    ignored: set[int] = field(default_factory=set)   # late finishes logged (each once)
    #: the RM's ``Preemptions`` when preemption is on: a warned container's end is its business
    preemptions: object | None = field(default=None, repr=False)

    def add(self, rec: ContainerRecord) -> None:
        """A container just placed (ALLOCATED)."""
        self.table[rec.container] = rec
        self.by_app.setdefault(rec.app, set()).add(rec.container)
        self.by_node.setdefault(rec.node, set()).add(rec.container)

    def set_state(self, c: ContainerRecord, state: str) -> None:
        """Move a container to ``state``, keeping the live indexes and the running count."""
        self.running += (state == RUNNING) - (c.state == RUNNING)
        c.state = state
        if state in (COMPLETE, RELEASED):
            if self.preemptions is not None:
                self.preemptions.table.pop(c.container, None)
            for index, key in ((self.by_app, c.app), (self.by_node, c.node)):
                ids = index.get(key)
                if ids is not None:
                    ids.discard(c.container)
                    if not ids:
                        del index[key]

    def live(self, *, app: str | None = None, node: str | None = None) -> list[ContainerRecord]:
        """The live containers of one app or one node, in container id order (allocation
        order, whatever the set's layout)."""
        ids = self.by_app.get(app, ()) if app is not None else self.by_node.get(node, ())
        return [self.table[i] for i in sorted(ids)]

    def acquired(self) -> list[ContainerRecord]:
        """The containers delivered to their AMs and not reported running (ACQUIRED)."""
        table = self.table
        return [table[i] for ids in self.by_app.values() for i in ids if table[i].state == ACQUIRED]

    def tell(self, app: AppRecord, wake: bool = True) -> None:
        """The RM has, or may have, something for ``app``'s AM: its host's next allocate looks
        at it (``AppMasters.allocate``), and (``wake``) a long poll of that host wakes."""
        if wake:
            self.news.add(app.host)
        self.notice.setdefault(app.host, set()).add(app.spec.app_id)

    def _release(self, c: ContainerRecord) -> None:
        if c.container in self.scheduler.cluster.containers:
            self.scheduler.release(c.container)

    # ----- what the NMs report -----------------------------------------------------

    def status(self, now: float, node: NodeRecord, st: ContainerStatus) -> bool:
        """Apply one reported status; True when a COMPLETE status is recorded (ack it)."""
        c = self.table.get(st.container)
        if c is None or c.node != node.spec.name or c.app != st.app:
            # Fencing: an NM reports only containers the RM placed on it, for their own app.
            self.records.refuse(now, "refused", app=st.app, task=st.task, container=st.container,
                                node=node.spec.name, detail="status for a container this node does not run")
            if st.state == RUNNING:
                node.cleanup.append(st.container)
            return st.state == COMPLETE
        if c.state in (RELEASED, COMPLETE):
            # Released before it ran, or already declared lost (its NM was partitioned past
            # the expiry): it must not run now, and its finish is not its task's
            late = on_late_status(st.state == RUNNING, st.state == COMPLETE and (st.exit or FINISHED) == FINISHED
                                  and (c.given_up or c.state == RELEASED))
            if late is LateStatus.KILL:
                node.cleanup.append(st.container)
                self.records.event(now, late.value, app=c.app, task=st.task, container=c.container,
                                   node=c.node, detail=late_status_detail(late, c.state))
            elif late is LateStatus.IGNORED and c.container not in self.ignored:
                self.ignored.add(c.container)
                self.records.event(now, late.value, app=c.app, task=st.task, container=c.container,
                                   node=c.node, detail=late_status_detail(late, c.state))
            return st.state == COMPLETE
        if c.state in (ALLOCATED, ACQUIRED):
            self.launched(c, st)
        if st.state == COMPLETE:
            self.complete(now, c, st)
        return st.state == COMPLETE

    def launched(self, c: ContainerRecord, st: ContainerStatus) -> None:
        """The NM started ``c`` for task ``st.task``: a new attempt of that task begins."""
        app = self.apps[c.app]
        attempt = app.task_attempts.get(st.task, 0)
        app.task_attempts[st.task] = attempt + 1
        self.set_state(c, RUNNING)
        c.task, c.attempt, c.launched = st.task, attempt, st.launched
        submit = app.asked.get(st.task, app.submit)
        records = self.records
        records.log.start(c.app, st.task, attempt, c.node, submit, records.trace(st.launched),
                          records.wall(st.launched), container=c.container)
        records.alloc_to_launch.append(st.launched - c.allocated)

    def complete(self, now: float, c: ContainerRecord, st: ContainerStatus) -> None:
        """``c`` ended as ``st`` says (finished, failed, killed or lost): its attempt ends;
        one the RM preempted ends as ``Preemptions.ended`` says."""
        records = self.records
        if self.preemptions is not None and c.container in self.preemptions.table:
            st = self.preemptions.ended(c.container, st)
        if c.container in self.scheduler.cluster.containers:
            self.scheduler.release(c.container)
            records.touched.add(c.app)
        self.set_state(c, COMPLETE)
        end = st.finish if st.finish is not None else now
        t_end = records.trace(end)
        records.log.end(c.app, c.task, c.attempt, st.exit or FINISHED, t_end, records.wall(end),
                        container=c.container, detail=st.detail)
        if st.start is not None:
            records.alloc_to_running.append(st.start - c.allocated)
        app = self.apps.get(c.app)
        if app is None:
            return
        if (st.exit or FINISHED) == FINISHED:
            if c.task in app.finished_tasks:
                records.duplicate_finishes += 1
                records.log.event("duplicate_finish", t_end, records.wall(end), app=c.app, task=c.task,
                                  container=c.container)
            else:
                app.finished_tasks.add(c.task)
                records.finished += 1
            app.last_finish = t_end if app.last_finish is None else max(app.last_finish, t_end)
        else:
            app.asked[c.task] = t_end
        app.completed.append(st)
        self.tell(app)

    # ----- containers nobody will run ---------------------------------------------------

    def lose(self, now: float, c: ContainerRecord, detail: str) -> None:
        """A container gone with its node, by its ``fault_rules.Fate``: withdrawn if its AM
        never saw it, reported lost if the AM holds it unstarted, else its attempt ends LOST."""
        app = self.apps.get(c.app)
        fate = fate_on_node_lost(c.state != ALLOCATED, c.state == RUNNING)
        c.given_up = True
        if fate is Fate.WITHDRAWN:                 # never seen by the AM: withdraw it quietly
            self.set_state(c, RELEASED)
            self._release(c)
            if app is not None:
                app.undelivered = [a for a in app.undelivered if a.container != c.container]
                self.tell(app, wake=False)         # its ask counts one container fewer now
            return
        launched = c.launched if c.launched is not None else now
        st = ContainerStatus(c.container, c.app, c.task, c.attempt, c.node, COMPLETE, launched,
                             None, now, LOST, detail)
        if fate is Fate.REPORTED:                  # the AM holds it but no attempt was logged
            self.set_state(c, COMPLETE)
            self._release(c)
            if app is not None:
                app.completed.append(st)
                self.tell(app)
        else:
            self.complete(now, c, st)

    def withdraw(self, c: ContainerRecord) -> None:
        """A container nobody will start: its resources go back; the NM kills it if it runs."""
        self.set_state(c, RELEASED)
        if c.container in self.scheduler.cluster.containers:
            self.scheduler.release(c.container)
            self.records.touched.add(c.app)


# ----- preemption ------------------------------------------------------------------------

class Victim(NamedTuple):
    """One container the rules take back: from queue ``source`` for queue ``starved``, killed
    at trace time ``deadline`` unless it has finished (the journal's record of a decision)."""

    container: int
    app: str
    source: str
    starved: str
    deadline: float


@dataclass(slots=True)
class Warned:
    """A container warned and not yet ended; ``killed`` once its kill was issued."""

    victim: Victim
    node: str
    killed: bool = False


@dataclass(eq=False, slots=True)
class Preemptions:
    """The containers the RM is taking back (module docstring).

    Contract: ``table`` holds exactly the warned containers that have not ended (it is the
    ``Containers``' ``preempting``, shared); ``preempted`` counts per app the containers that
    ended preempted, ``by_queue`` per queue they were taken from and ``lost`` the trace seconds
    they had run, ``warned`` the containers warned so far, ``spared`` the warned ones that
    finished before their deadline.  ``rules`` is the clock-free decision
    (``decide(now, scheduler) -> victims``), None when preemption is off: then nothing here
    runs and the replay's protocol is unchanged.
    """

    rules: object | None
    containers: Containers = field(repr=False)
    nodes: dict[str, NodeRecord] = field(repr=False)
    notice: dict[str, set[str]] = field(repr=False)       # the ``NodeManagers``' (a host's NMs with news)
    apps: dict[str, AppRecord] = field(repr=False)
    records: RunRecords = field(repr=False)
    table: dict[int, Warned] = field(default_factory=dict)
    preempted: dict[str, int] = field(default_factory=dict)
    by_queue: dict[str, int] = field(default_factory=dict)
    lost: dict[str, float] = field(default_factory=dict)       # per queue, the task-seconds preempted work had run
    warned: int = 0
    spared: int = 0

    def decide(self, now: float, scheduler) -> list[Victim]:
        """The rules' victims at wall time ``now`` not already warned (the rules' clocks move;
        nothing here changes until ``warn``)."""
        if self.rules is None or self.records.clock is None:
            return []
        out = []
        for v in self.rules.decide(self.records.trace(now), scheduler):
            cid = int(v.container)
            if cid not in self.table:
                out.append(Victim(cid, str(v.app), str(v.source), str(v.starved), float(v.deadline)))
        return out

    def warn(self, now: float, victims: list[Victim]) -> list[int]:
        """Tell each victim's AM (``PreemptionMessage`` in its next allocate answer); returns
        the containers warned.  A container no longer live, or already warned, is skipped."""
        out, table, records = [], self.containers.table, self.records
        for v in victims:
            c = table.get(v.container)
            if c is None or c.app != v.app or c.state in (COMPLETE, RELEASED) or v.container in self.table:
                continue
            self.table[v.container] = Warned(v, c.node)
            self.warned += 1
            app = self.apps[v.app]
            app.warnings.append((v.container, v.deadline))
            self.containers.tell(app)
            records.event(now, "preempt_warned", app=v.app, container=v.container, node=c.node,
                          detail=f"from {v.source} for {v.starved}; killed at {v.deadline:.3f} unless finished")
            out.append(v.container)
        return out

    def due(self, now: float) -> list[int]:
        """The warned containers whose deadline has passed at wall time ``now``, not yet killed."""
        t = self.records.trace(now)
        return sorted(cid for cid, w in self.table.items() if not w.killed and w.victim.deadline <= t)

    def kill(self, now: float, ids: list[int]) -> list[int]:
        """The deadline of each of ``ids`` has come: its NM kills it (``cleanup``); one never
        started is given up; returns the containers killed."""
        out, table = [], self.containers.table
        for cid in ids:
            w = self.table.get(cid)
            if w is None or w.killed:
                continue
            w.killed = True
            c = table[cid]
            self.records.event(now, "preempt_killed", app=c.app, task=c.task, container=cid, node=c.node,
                               detail=f"from {w.victim.source} for {w.victim.starved}")
            if c.state == RUNNING:
                self._cleanup(cid, c.node)
            else:
                self.containers.lose(now, c, "preempted before it started")
            out.append(cid)
        return out

    def _cleanup(self, cid: int, node: str) -> None:
        rec = self.nodes.get(node)
        if rec is not None and rec.alive and cid not in rec.cleanup:
            rec.cleanup.append(cid)
            self.notice.setdefault(rec.host, set()).add(node)      # as ``NodeManagers.notify``

    def ended(self, cid: int, st: ContainerStatus) -> ContainerStatus:
        """A warned container ended as ``st`` says: killed at its deadline it ended
        ``preempted`` (counted); finished first, it is spared."""
        w = self.table[cid]
        exit_ = st.exit or FINISHED
        if w.killed and exit_ == KILLED:
            v = w.victim
            self.preempted[v.app] = self.preempted.get(v.app, 0) + 1
            self.by_queue[v.source] = self.by_queue.get(v.source, 0) + 1
            c, records = self.containers.table[cid], self.records
            if c.launched is not None and st.finish is not None:
                ran = max(0.0, records.trace(st.finish) - records.trace(c.launched))
                self.lost[v.source] = self.lost.get(v.source, 0.0) + ran
            return st._replace(exit=PREEMPTED, detail=f"preempted for {v.starved}")
        if exit_ == FINISHED:
            self.spared += 1
        return st

    def resend(self) -> None:
        """After an RM restart: every kill issued and not confirmed goes on its node's cleanup
        again (the NM kills a container once, so a kill it already had is harmless)."""
        table = self.containers.table
        for cid, w in self.table.items():
            if w.killed and table[cid].state == RUNNING:
                self._cleanup(cid, w.node)

    def summary(self, now: float) -> dict:
        """summary.json ``preemption``, as the simulator writes it: the settings, containers
        warned, preempted and spared, and per queue the containers preempted from it, the
        task-seconds they had run and each starvation episode (start, restored; null: not
        restored by the end, wall time ``now``)."""
        rules, t = self.rules, self.records.trace(now)
        rules.close(t)
        queues: dict[str, dict] = {}
        for q, n in self.by_queue.items():
            queues.setdefault(q, {})["preempted_containers"] = n
            queues[q]["lost_task_seconds"] = round(self.lost.get(q, 0.0), 6)
        for q, start, restored in rules.episodes:
            done = restored != float("inf")
            queues.setdefault(q, {}).setdefault("starved", []).append(
                {"start": round(start, 6), "restored": round(restored, 6) if done else None,
                 "seconds": round(restored - start, 6) if done else None})
        return {"settings": rules.config.to_dict(), "warned": self.warned, "preempted": sum(self.by_queue.values()),
                "spared": self.spared, "queues": dict(sorted(queues.items()))}

    def counts(self) -> dict:
        """What the live RM shows: containers preempted per app and per queue, warned now (in
        all and per app), spared."""
        warned: dict[str, int] = {}
        for w in self.table.values():
            warned[w.victim.app] = warned.get(w.victim.app, 0) + 1
        return {"apps": dict(self.preempted), "queues": dict(self.by_queue), "warned": len(self.table),
                "warned_apps": warned, "spared": self.spared, "preempted": sum(self.preempted.values())}
