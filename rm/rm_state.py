"""The ResourceManager's protocol state: plain synchronous Python, no Ray, no clock reads.

``ResourceManagerState`` is what the Ray actor (``rm/actor.py``) wraps.  Every
public method takes ``now`` (a wall time read by the caller) plus the call's
``caller`` and ``request_id`` and nothing else from the outside world, so the
state after a sequence of calls is a function of that sequence: a journal of
calls replayed onto a snapshot rebuilds it (the ResourceManager restart of
issue 5), and tests drive it without Ray.

The protocol is YARN's (rm/protocol.py has the messages):

* NODE_UPDATE — ``node_heartbeat``: the NM's container statuses are applied
  (RUNNING: the attempt is logged as started; COMPLETE: its resources return to
  the node and the status is queued for the app's AM), then the scheduler runs
  (``OnlineScheduler.schedule``) and what it places is queued for the AMs.  The
  NM gets back what to kill (``cleanup``) and which COMPLETE statuses were
  recorded (``ack``); it repeats an unacknowledged status in its next heartbeat.
* AM heartbeat — ``allocate``: releases unused containers, sets the app's
  outstanding ask, and hands over the containers allocated and the statuses
  completed since the last call.  Nothing is scheduled here; allocations wait
  for the next NODE_UPDATE, and the AM's next ``allocate`` picks them up.
* ``register_nodes`` / ``register_apps`` / ``finish_apps``; ``lose_node`` and
  ``expire_nodes`` (an NM silent for ``nm_expiry`` heartbeats is LOST: its
  containers are reported lost to their AMs, which ask again).

Idempotence: the response to each caller's latest ``request_id`` is kept; the
same id again gets the same response and changes nothing.
"""

from __future__ import annotations

from rm.model import NodeSpec, Resources
from rm.policies import Policy
from rm.protocol import (COMPLETE, FENCED, FINISHED, LOST, NORMAL, RESYNC, RUNNING, Allocation,
                         AllocateRequest, AllocateResponse, AppRegistered, AppRegistration,
                         ContainerStatus, NodeHeartbeat, NodeHeartbeatResponse, NodeRegistration)
from rm.rm_records import ACQUIRED, ALLOCATED, RELEASED, AppRecord, ContainerRecord, NodeRecord
from rm.runlog import RunLog, app_shares
from rm.scheduler import OnlineScheduler

class ResourceManagerState:
    """Scheduler + protocol bookkeeping + run log, driven by explicit calls (see module doc)."""

    def __init__(self, *, dims, nodes: list[NodeSpec], policy: Policy | str, policy_name: str,
                 time_scale: float, name: str = "", seed: int | None = None):
        self.scheduler = OnlineScheduler(policy, dims, nodes)
        self.log = RunLog(tuple(dims), mode="ray", policy=policy_name, name=name, seed=seed)
        self.time_scale = float(time_scale)
        self.start_wall: float | None = None
        self.nodes: dict[str, NodeRecord] = {n.name: NodeRecord(n) for n in nodes}
        self.apps: dict[str, AppRecord] = {}
        self.containers: dict[int, ContainerRecord] = {}
        self._responses: dict[str, tuple[int, object]] = {}
        self.news: set[str] = set()          # AM hosts with something to deliver
        self.total_tasks = 0
        self.finished = 0
        self.allocations = 0
        self.heartbeats = 0
        self.duplicate_finishes = 0
        self.refused = 0
        self.alloc_to_running: list[float] = []   # wall seconds, payload start - allocation
        self.alloc_to_launch: list[float] = []    # wall seconds, NM launch - allocation
        self._touched: set[str] = set()
        self._last_share_time = 0.0

    # ----- time ----------------------------------------------------------------

    def trace(self, now: float) -> float:
        """trace time = (wall - start) / time_scale; 0 before the clock starts."""
        return 0.0 if self.start_wall is None else max(0.0, (now - self.start_wall) / self.time_scale)

    def wall(self, now: float) -> float:
        return 0.0 if self.start_wall is None else now - self.start_wall

    def start_clock(self, start_wall: float) -> None:
        """t = 0: the NMs registered so far join the run log at time 0."""
        self.start_wall = start_wall
        for rec in self.nodes.values():
            if rec.alive:
                self.log.add_node(rec.spec, 0.0, 0.0, ray_node=rec.ray_node)

    # ----- idempotence ---------------------------------------------------------

    def _cached(self, caller: str, request_id: int):
        hit = self._responses.get(caller)
        return hit[1] if hit is not None and hit[0] == request_id else None

    def _remember(self, caller: str, request_id: int, response):
        self._responses[caller] = (request_id, response)
        return response

    # ----- NodeManagers --------------------------------------------------------

    def register_nodes(self, now: float, caller: str, request_id: int,
                       regs: list[NodeRegistration]) -> list[str]:
        """NMs join (or come back after being lost, empty); returns an action per NM."""
        cached = self._cached(caller, request_id)
        if cached is not None:
            return cached
        out = []
        for reg in regs:
            rec = self.nodes.get(reg.node)
            if rec is None:
                rec = NodeRecord(NodeSpec(reg.node, Resources(dict(reg.capacity)), dict(reg.attributes)))
                self.nodes[reg.node] = rec
            idx = self.scheduler.cluster.node_index.get(reg.node)
            if idx is None or not self.scheduler.cluster.nodes[idx].alive:
                self.scheduler.add_node(rec.spec)          # a new node, or a lost one back
                self._touch_all()
            rec.host, rec.ray_node, rec.alive, rec.last_seen = caller, reg.ray_node, True, now
            if self.start_wall is not None:
                self.log.add_node(rec.spec, self.trace(now), self.wall(now), ray_node=reg.ray_node)
            out.append(NORMAL)
        self._after(now)
        return self._remember(caller, request_id, out)

    def node_heartbeat(self, now: float, caller: str, request_id: int,
                       beats: list[NodeHeartbeat]) -> list[NodeHeartbeatResponse]:
        """NODE_UPDATE for a batch of NMs: apply statuses, schedule, answer each NM."""
        cached = self._cached(caller, request_id)
        if cached is not None:
            return cached
        out = []
        for beat in beats:
            rec = self.nodes.get(beat.node)
            if rec is None or not rec.alive:
                out.append(NodeHeartbeatResponse(beat.node, RESYNC))
                continue
            rec.last_seen = now
            self.heartbeats += 1
            acks = [st.container for st in beat.statuses if self._container_status(now, rec, st)]
            cleanup, rec.cleanup = tuple(rec.cleanup), []
            out.append(NodeHeartbeatResponse(beat.node, NORMAL, cleanup, tuple(acks)))
        self._schedule(now)
        self._after(now)
        return self._remember(caller, request_id, out)

    def _container_status(self, now: float, node: NodeRecord, st: ContainerStatus) -> bool:
        """Apply one reported status; True when a COMPLETE status is recorded (ack it)."""
        c = self.containers.get(st.container)
        if c is None or c.node != node.spec.name or c.app != st.app:
            # Fencing: an NM reports only containers the RM placed on it, for their own app.
            self.refused += 1
            self.log.event("refused", self.trace(now), self.wall(now), app=st.app, task=st.task,
                           container=st.container, node=node.spec.name,
                           detail="status for a container this node does not run")
            if st.state == RUNNING:
                node.cleanup.append(st.container)
            return st.state == COMPLETE
        if c.state == RELEASED:
            # Given back (or its app finished) before it ran: it must not run now.
            if st.state == RUNNING:
                node.cleanup.append(st.container)
            return st.state == COMPLETE
        if c.state in (ALLOCATED, ACQUIRED):
            self._launched(now, c, st)
        if st.state == COMPLETE and c.state != COMPLETE:
            self._complete(now, c, st)
        return st.state == COMPLETE

    def _launched(self, now: float, c: ContainerRecord, st: ContainerStatus) -> None:
        c.state, c.task, c.attempt, c.launched = RUNNING, st.task, st.attempt, st.launched
        app = self.apps[c.app]
        submit = app.asked.get(st.task, app.submit)
        self.log.start(c.app, st.task, st.attempt, c.node, submit, self.trace(st.launched),
                       self.wall(st.launched), container=c.container)
        self.alloc_to_launch.append(st.launched - c.allocated)

    def _complete(self, now: float, c: ContainerRecord, st: ContainerStatus) -> None:
        held = c.container in self.scheduler.cluster.containers
        if held:
            self.scheduler.release(c.container)
            self._touched.add(c.app)
        c.state = COMPLETE
        end = st.finish if st.finish is not None else now
        t_end = self.trace(end)
        self.log.end(c.app, c.task, c.attempt, st.exit or FINISHED, t_end, self.wall(end),
                     container=c.container, detail=st.detail)
        if st.start is not None:
            self.alloc_to_running.append(st.start - c.allocated)
        app = self.apps.get(c.app)
        if app is None:
            return
        if (st.exit or FINISHED) == FINISHED:
            if c.task in app.finished_tasks:
                self.duplicate_finishes += 1
                self.log.event("duplicate_finish", t_end, self.wall(end), app=c.app, task=c.task,
                               container=c.container)
            else:
                app.finished_tasks.add(c.task)
                self.finished += 1
            app.last_finish = t_end if app.last_finish is None else max(app.last_finish, t_end)
        else:
            app.asked[c.task] = t_end
        app.completed.append(st)
        self.news.add(app.host)

    def lose_node(self, now: float, name: str, detail: str = "lost") -> list[int]:
        """The NM is LOST: its containers are reported lost to their AMs; returns their ids."""
        rec = self.nodes.get(name)
        if rec is None or not rec.alive:
            return []
        rec.alive = False
        self.scheduler.remove_node(name)
        self.log.remove_node(name, self.trace(now), self.wall(now), detail=detail)
        self._touch_all()
        lost = []
        for c in list(self.containers.values()):
            if c.node != name or c.state in (COMPLETE, RELEASED):
                continue
            lost.append(c.container)
            app = self.apps.get(c.app)
            if c.state == ALLOCATED:               # never seen by the AM: withdraw it quietly
                c.state = RELEASED
                if app is not None:
                    app.undelivered = [a for a in app.undelivered if a.container != c.container]
                continue
            launched = c.launched if c.launched is not None else now
            st = ContainerStatus(c.container, c.app, c.task, c.attempt, name, COMPLETE, launched,
                                 None, now, LOST, detail)
            if c.state == ACQUIRED:                # the AM holds it but no attempt was logged
                c.state = COMPLETE
                if app is not None:
                    app.completed.append(st)
                    self.news.add(app.host)
            else:
                self._complete(now, c, st)
        self._after(now)
        return lost

    def expire_nodes(self, now: float, expiry_wall: float) -> list[str]:
        """NMs silent for longer than ``expiry_wall`` seconds are LOST; returns their names."""
        gone = [n for n, r in self.nodes.items() if r.alive and now - r.last_seen > expiry_wall]
        for n in gone:
            self.lose_node(now, n, f"no heartbeat for {now - self.nodes[n].last_seen:.3f}s")
        return gone

    # ----- ApplicationMasters --------------------------------------------------

    def register_apps(self, now: float, caller: str, request_id: int,
                      regs: list[AppRegistration]) -> list[AppRegistered]:
        """Apps arrive; one no live node could ever run is rejected with the reason."""
        cached = self._cached(caller, request_id)
        if cached is not None:
            return cached
        out = []
        for reg in regs:
            spec = reg.spec
            app = self.apps.get(spec.app_id)
            if app is not None:
                if reg.attempt < app.attempt:
                    out.append(AppRegistered(spec.app_id, False, "stale attempt", FENCED))
                    continue
                app.attempt, app.host = reg.attempt, caller
                out.append(AppRegistered(spec.app_id, True))
                continue
            state, reason = self.scheduler.submit(spec, pending=0)
            t = self.trace(now)
            if state is None:
                self.log.reject(spec, reason, t, self.wall(now))
                out.append(AppRegistered(spec.app_id, False, reason))
                continue
            self.apps[spec.app_id] = AppRecord(spec, caller, reg.attempt, t)
            self.total_tasks += spec.num_tasks
            self.log.submit(spec, t, self.wall(now))
            out.append(AppRegistered(spec.app_id, True))
        self._after(now)
        return self._remember(caller, request_id, out)

    def allocate(self, now: float, caller: str, request_id: int,
                 requests: list[AllocateRequest]) -> list[AllocateResponse]:
        """AM heartbeats: releases, absolute asks, and what is waiting for each app."""
        cached = self._cached(caller, request_id)
        if cached is not None:
            return cached
        out = []
        for req in requests:
            app = self.apps.get(req.app)
            if app is None or app.done:
                out.append(AllocateResponse(req.app, RESYNC if app is None else NORMAL))
                continue
            if req.attempt != app.attempt:
                self.refused += 1
                self.log.event("fenced", self.trace(now), self.wall(now), app=req.app,
                               detail=f"allocate from attempt {req.attempt}, current {app.attempt}")
                out.append(AllocateResponse(req.app, FENCED))
                continue
            app.host = caller
            for cid in req.releases:
                self._release_unused(now, app, cid)
            self._set_ask(app, req.ask - len(app.undelivered))
            out.append(self._deliver(app))
        self._after(now)
        return self._remember(caller, request_id, out)

    def poll(self, now: float, caller: str, request_id: int, app_ids: list[str]) -> list[AllocateResponse]:
        """Deliver what arrived since ``allocate`` answered the same request (the long poll)."""
        out = []
        for a in app_ids:
            app = self.apps.get(a)
            out.append(self._deliver(app) if app is not None and not app.done else AllocateResponse(a))
        return self._remember(caller, request_id, out)

    def _deliver(self, app: AppRecord) -> AllocateResponse:
        allocated, app.undelivered = tuple(app.undelivered), []
        completed, app.completed = tuple(app.completed), []
        for a in allocated:
            c = self.containers[a.container]
            if c.state == ALLOCATED:
                c.state = ACQUIRED
        return AllocateResponse(app.spec.app_id, NORMAL, allocated, completed)

    def _set_ask(self, app: AppRecord, wanted: int) -> None:
        state = self.scheduler.cluster.apps[app.spec.app_id]
        wanted = max(0, wanted)
        if wanted > state.pending:
            self.scheduler.ask(app.spec.app_id, wanted - state.pending)
        elif wanted < state.pending:
            self.scheduler.cancel(app.spec.app_id, state.pending - wanted)

    def _release_unused(self, now: float, app: AppRecord, cid: int) -> None:
        c = self.containers.get(cid)
        if c is None or c.app != app.spec.app_id or c.state not in (ALLOCATED, ACQUIRED):
            return
        c.state = RELEASED
        if cid in self.scheduler.cluster.containers:
            self.scheduler.release(cid)
            self._touched.add(c.app)
        self.log.event("release", self.trace(now), self.wall(now), app=c.app, container=cid, node=c.node)

    def finish_apps(self, now: float, caller: str, request_id: int,
                    items: list[tuple[str, int]]) -> list[str]:
        """AMs unregister (YARN FinishApplicationMaster); containers left are cleaned up."""
        cached = self._cached(caller, request_id)
        if cached is not None:
            return cached
        out = []
        for app_id, attempt in items:
            app = self.apps.get(app_id)
            if app is None:
                out.append(RESYNC)
                continue
            if attempt != app.attempt:
                out.append(FENCED)
                continue
            if not app.done:
                app.done = True
                for c in self.scheduler.finish_app(app_id):
                    rec = self.containers[c.container_id]
                    if rec.state == RUNNING:           # still running: the NM kills it
                        self.nodes[rec.node].cleanup.append(c.container_id)
                    else:
                        rec.state = RELEASED
                self._touched.add(app_id)
                status = "finished" if len(app.finished_tasks) == app.spec.num_tasks else "failed"
                t = app.last_finish if app.last_finish is not None else self.trace(now)
                self.log.app_done(app_id, t, self.wall(now), status=status)
            out.append(NORMAL)
        self._after(now)
        return self._remember(caller, request_id, out)

    # ----- scheduling and shares -----------------------------------------------

    def _schedule(self, now: float) -> None:
        for c in self.scheduler.schedule():
            self.containers[c.container_id] = ContainerRecord(c.container_id, c.app_id, c.node, now)
            app = self.apps[c.app_id]
            node = self.nodes[c.node]
            app.undelivered.append(Allocation(c.container_id, c.app_id, c.node, node.host, now))
            self.news.add(app.host)
            self._touched.add(c.app_id)
            self.allocations += 1

    def _touch_all(self) -> None:
        """Nodes joined or left: every app's h (and so its shares) may have changed."""
        self._touched.update(a for a, r in self.apps.items() if not r.done)

    def _after(self, now: float) -> None:
        """Log share rows for apps whose running count or h changed (shares.csv)."""
        if not self._touched or self.start_wall is None:
            return
        t = max(self.trace(now), self._last_share_time)
        self._last_share_time = t
        cluster = self.scheduler.cluster
        for app_id in sorted(self._touched):
            state = cluster.apps.get(app_id)
            if state is None:
                self.log.share(t, app_id, (0.0, 0.0, 0.0, 0.0), 0)
            else:
                self.log.share(t, app_id, app_shares(state, cluster), state.running)
        self._touched.clear()

    # ----- views ---------------------------------------------------------------

    @property
    def pending_asks(self) -> int:
        return sum(a.pending for a in self.scheduler.cluster.apps.values())

    @property
    def running(self) -> int:
        return sum(1 for c in self.containers.values() if c.state == RUNNING)

    def progress(self, now: float) -> dict:
        return {"time": round(self.trace(now), 3), "running": self.running,
                "allocated": len(self.scheduler.cluster.containers), "finished": self.finished,
                "total_tasks": self.total_tasks, "pending": self.pending_asks,
                "allocations": self.allocations, "heartbeats": self.heartbeats,
                "duplicate_finishes": self.duplicate_finishes, "refused": self.refused,
                "nodes_alive": sum(1 for r in self.nodes.values() if r.alive)}
