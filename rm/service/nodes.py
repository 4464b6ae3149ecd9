"""The NodeManager side of the ResourceManager's protocol (a part of ``ResourceManagerState``).

In YARN's words (ResourceTrackerService, RMNode, NMLivelinessMonitor):

* ``register_nodes`` — RegisterNodeManager.  A new node joins; a LOST node comes
  back empty; a node the RM believes alive registers again after a RESYNC (the RM
  restarted) or after its NM restarted unnoticed.  The NM lists the containers it
  still knows (``NodeRegistration.running``, YARN's NMContainerStatus) and the RM
  reconciles: what the NM reports is applied as in a heartbeat; a container the
  RM had RUNNING there and the NM no longer reports is LOST; one the NM runs that
  the RM had already declared lost or released is added to ``cleanup`` (killed).
* ``node_heartbeat`` — NODE_UPDATE (see ``rm/service/state.py``).  A node that is not
  alive gets RESYNC; one alive under another host gets FENCED; one waiting to
  resynchronise after an RM restart gets RESYNC without its statuses applied.
* ``lose_node`` / ``lose_host`` / ``expire_nodes`` — the node is LOST (its NM
  host actor died, or it was silent for ``nm_expiry``): its containers are
  reported lost to their AMs, which ask again.

Fencing (an NM can report only containers it runs): a status for a container the
RM did not place on that node for that app is refused, logged, and the container
killed if the NM says it runs.
"""

from __future__ import annotations

from rayrm.rm.core.fault_rules import (NOT_REPORTED, Fate, Registration, fate_on_node_lost, nm_lost_detail,
                                       on_nm_registers, wall_seconds)
from rayrm.rm.core.model import NodeSpec, Resources
from rayrm.rm.service.protocol import (COMPLETE, FENCED, FINISHED, LOST, NORMAL, RESYNC, RUNNING, ContainerStatus,
                         NodeHeartbeat, NodeHeartbeatResponse, NodeRegistration)
from rayrm.rm.service.records import idempotent, ACQUIRED, ALLOCATED, RELEASED, ContainerRecord, NodeRecord


class NodeProtocol:
    """NodeManager calls and liveness; mixed into ``ResourceManagerState``."""

    @idempotent
    def register_nodes(self, now: float, caller: str, request_id: int,
                       regs: list[NodeRegistration]) -> list[str]:
        """NMs join, come back after being lost, or register again; an action per NM."""
        out = []
        # new nodes and lost ones back join the scheduler in one batch (its per-app refresh
        # once, not once per NM: a restarted host registers all its NMs in one call)
        cluster, joining = self.scheduler.cluster, {}
        for reg in regs:
            rec = self.nodes.get(reg.node)
            if rec is None:
                rec = NodeRecord(NodeSpec(reg.node, Resources(dict(reg.capacity)), dict(reg.attributes)))
                self.nodes[reg.node] = rec
            idx = cluster.node_index.get(reg.node)
            if not (rec.alive and rec.host != caller) and (idx is None or not cluster.nodes[idx].alive):
                joining.setdefault(reg.node, rec.spec)
        if joining:
            self.scheduler.add_nodes(list(joining.values()))
            self._touch_all()
        for reg in regs:
            rec = self.nodes[reg.node]
            if rec.alive and rec.host != caller:
                self._refuse(now, "refused", node=reg.node,
                             detail=f"registration from host {caller}; host {rec.host} runs this node")
                out.append(FENCED)
                continue
            verdict = on_nm_registers(not rec.alive, rec.resync)
            rejoin = verdict is Registration.REJOIN
            rec.host, rec.ray_node, rec.alive, rec.last_seen, rec.resync = caller, reg.ray_node, True, now, False
            self._as_of_host(rec, caller)
            if self.start_wall is not None:
                if rejoin:
                    self.log.add_node(rec.spec, self.trace(now), self.wall(now), ray_node=reg.ray_node)
                else:
                    self._event(now, verdict.value, node=reg.node,
                                detail=f"{len(reg.running)} containers reported")
            self._reconcile(now, rec, reg.running, rejoin)
            self.resync.registered(("node", reg.node))
            out.append(NORMAL)
        self._check_resynced(now)
        self._after(now)
        return out

    def _reconcile(self, now: float, rec: NodeRecord, running: tuple[ContainerStatus, ...],
                   rejoin: bool) -> None:
        """Apply what a registering NM reports; lose what it should run and does not."""
        reported = set()
        for st in running:
            reported.add(st.container)
            self._container_status(now, rec, st)
        if rejoin:
            return                       # its containers were all declared lost already
        name = rec.spec.name
        for c in self.live(node=name):
            if c.state == RUNNING and c.container not in reported:
                self._lose_container(now, c, NOT_REPORTED)

    @idempotent
    def node_heartbeat(self, now: float, caller: str, request_id: int, beats: list[NodeHeartbeat],
                       idle: tuple[str, ...] = (), sent: float = 0.0) -> list[NodeHeartbeatResponse]:
        """NODE_UPDATE for a batch of NMs: apply statuses, schedule, answer each NM.

        ``idle`` names NMs of the batch with nothing to report (no statuses, no refusals),
        sent as bare names; they are answered only when the RM has something for them
        (an action other than NORMAL, or containers to clean up), after the ``beats``'
        answers.  At paper scale most heartbeats are idle, and this keeps the call small.
        ``sent``: the host's wall time sending the call (liveness, ``rm/service/liveness.py``).
        """
        self._host_sent(caller, sent)
        out = [self._beat(now, caller, beat.node, beat, sent) for beat in beats]
        # Idle NMs are most of every call at paper scale (50,000 a wall second at 1,000 NMs
        # and time scale 0.02): the common case — alive, this host's, nothing to clean up —
        # is what ``_beat`` does for it, without building an answer nobody receives.
        nodes, calls, quiet = self.nodes, self.host_calls.get(caller, 0), 0
        for name in idle:
            rec = nodes.get(name)
            if rec is None or not rec.alive or rec.host != caller or rec.resync or rec.cleanup:
                resp = self._beat(now, caller, name, None, sent)
                if resp.action != NORMAL or resp.cleanup:
                    out.append(resp)
                continue
            rec.last_seen = now
            if sent:
                rec.last_sent, rec.last_call = sent, calls
            quiet += 1
        self.heartbeats += quiet
        self._schedule(now)
        self._after(now)
        return out

    def _beat(self, now: float, caller: str, name: str, beat: NodeHeartbeat | None,
              sent: float = 0.0) -> NodeHeartbeatResponse:
        rec = self.nodes.get(name)
        if rec is None or not rec.alive:
            return NodeHeartbeatResponse(name, RESYNC)
        if rec.host != caller:
            self._refuse(now, "refused", node=name, detail=f"heartbeat from host {caller}; host {rec.host} runs this node")
            return NodeHeartbeatResponse(name, FENCED)
        rec.last_seen = now
        self._carried(rec, caller, sent)
        if rec.resync:
            return NodeHeartbeatResponse(name, RESYNC)
        self.heartbeats += 1
        acks = ()
        if beat is not None:
            for cid, app, why in beat.refused:
                self._refuse(now, "refused", app=app, container=cid, node=name,
                             detail=f"launch refused by the NM: {why}")
            acks = tuple(st.container for st in beat.statuses if self._container_status(now, rec, st))
        cleanup = ()
        if rec.cleanup:
            cleanup, rec.cleanup = tuple(rec.cleanup), []
        return NodeHeartbeatResponse(name, NORMAL, cleanup, acks)

    def _container_status(self, now: float, node: NodeRecord, st: ContainerStatus) -> bool:
        """Apply one reported status; True when a COMPLETE status is recorded (ack it)."""
        c = self.containers.get(st.container)
        if c is None or c.node != node.spec.name or c.app != st.app:
            # Fencing: an NM reports only containers the RM placed on it, for their own app.
            self._refuse(now, "refused", app=st.app, task=st.task, container=st.container,
                         node=node.spec.name, detail="status for a container this node does not run")
            if st.state == RUNNING:
                node.cleanup.append(st.container)
            return st.state == COMPLETE
        if c.state in (RELEASED, COMPLETE):
            # Released before it ran, or already declared lost: it must not run now.
            if st.state == RUNNING:
                node.cleanup.append(st.container)
                self._event(now, "cleanup", app=c.app, task=st.task, container=c.container,
                            node=c.node, detail=f"the NM runs a container the RM holds {c.state}")
            return st.state == COMPLETE
        if c.state in (ALLOCATED, ACQUIRED):
            self._launched(now, c, st)
        if st.state == COMPLETE:
            self._complete(now, c, st)
        return st.state == COMPLETE

    def _launched(self, now: float, c: ContainerRecord, st: ContainerStatus) -> None:
        app = self.apps[c.app]
        attempt = app.task_attempts.get(st.task, 0)
        app.task_attempts[st.task] = attempt + 1
        self._set_state(c, RUNNING)
        c.task, c.attempt, c.launched = st.task, attempt, st.launched
        submit = app.asked.get(st.task, app.submit)
        self.log.start(c.app, st.task, attempt, c.node, submit, self.trace(st.launched),
                       self.wall(st.launched), container=c.container)
        self.alloc_to_launch.append(st.launched - c.allocated)

    def _complete(self, now: float, c: ContainerRecord, st: ContainerStatus) -> None:
        if c.container in self.scheduler.cluster.containers:
            self.scheduler.release(c.container)
            self._touched.add(c.app)
        self._set_state(c, COMPLETE)
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

    def _lose_container(self, now: float, c: ContainerRecord, detail: str) -> None:
        """A container is gone with its node: withdrawn if the AM never saw it, else LOST."""
        app = self.apps.get(c.app)
        fate = fate_on_node_lost(c.state != ALLOCATED, c.state == RUNNING)
        if fate is Fate.WITHDRAWN:                 # never seen by the AM: withdraw it quietly
            self._set_state(c, RELEASED)
            if c.container in self.scheduler.cluster.containers:
                self.scheduler.release(c.container)
            if app is not None:
                app.undelivered = [a for a in app.undelivered if a.container != c.container]
            return
        launched = c.launched if c.launched is not None else now
        st = ContainerStatus(c.container, c.app, c.task, c.attempt, c.node, COMPLETE, launched,
                             None, now, LOST, detail)
        if fate is Fate.REPORTED:                  # the AM holds it but no attempt was logged
            self._set_state(c, COMPLETE)
            if c.container in self.scheduler.cluster.containers:
                self.scheduler.release(c.container)
            if app is not None:
                app.completed.append(st)
                self.news.add(app.host)
        else:
            self._complete(now, c, st)

    def lose_node(self, now: float, name: str, detail: str = "lost") -> list[int]:
        """The NM is LOST: its containers are reported lost to their AMs; returns their ids."""
        return self._lose_nodes(now, [(name, detail)])

    def _lose_nodes(self, now: float, gone: list[tuple[str, str]]) -> list[int]:
        """NMs (name, why) LOST together; returns their containers' ids.  The scheduler
        drops them in one batch and shares are logged once: losing an NM host's 1,000 NMs
        costs one refresh of every app, not 1,000 (each touching every app)."""
        gone = [(n, why) for n, why in gone if n in self.nodes and self.nodes[n].alive]
        if not gone:
            return []
        for name, _ in gone:
            rec = self.nodes[name]
            rec.alive, rec.resync, rec.cleanup = False, False, []
            self.resync.registered(("node", name))
        self.scheduler.remove_nodes([n for n, _ in gone])     # releases their containers there
        self._touch_all()
        lost = []
        for name, detail in gone:
            self.log.remove_node(name, self.trace(now), self.wall(now), detail=detail)
            for c in self.live(node=name):
                if c.state not in (COMPLETE, RELEASED):
                    lost.append(c.container)
                    self._lose_container(now, c, detail)
        self._check_resynced(now)
        self._after(now)
        return lost

    @idempotent
    def lose_host(self, now: float, caller: str, request_id: int, host: str,
                  detail: str = "NM host died") -> list[str]:
        """Every NM the host ``host`` runs is LOST (its actor died); returns their names."""
        gone = [n for n, r in self.nodes.items() if r.alive and r.host == host]
        self._lose_nodes(now, [(n, detail) for n in gone])
        return gone

    def expire_nodes(self, now: float, expiry_wall: float, names: list[str] | None = None) -> list[str]:
        """NMs silent for longer than ``expiry_wall`` seconds are LOST; returns their names.

        ``names``: the NMs the RM decided are silent (``rm/service/liveness.py``: only
        silence it could have heard counts); without it, wall-clock silence.
        """
        gone = [n for n, r in self.nodes.items() if r.alive and now - r.last_seen > expiry_wall] \
            if names is None else [n for n in names if n in self.nodes and self.nodes[n].alive]
        self._lose_nodes(now, [(n, nm_lost_detail(now - self.nodes[n].last_seen, wall_seconds)) for n in gone])
        return gone
