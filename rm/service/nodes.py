"""The NodeManager side of the ResourceManager's protocol (a part of ``ResourceManagerState``).

In YARN's words (ResourceTrackerService, RMNode, NMLivelinessMonitor):

* ``register`` (``register_nodes``) — RegisterNodeManager.  A new node joins; a LOST node
  comes back empty; a node the RM believes alive registers again after a RESYNC (the RM
  restarted) or after its NM restarted unnoticed (``fault_rules.on_nm_registers``).  The
  NM lists the containers it still knows (``NodeRegistration.running``, YARN's
  NMContainerStatus) and the RM reconciles: what the NM reports is applied as in a
  heartbeat; a container the RM had RUNNING there and the NM no longer reports is LOST;
  one the NM runs that the RM had already declared lost or released is added to
  ``cleanup`` (killed).
* ``heartbeat`` (``node_heartbeat``) — NODE_UPDATE (see ``rm/service/state.py``).  A node
  that is not alive gets RESYNC; one alive under another host gets FENCED; one waiting to
  resynchronise after an RM restart gets RESYNC without its statuses applied.
* ``lose`` (``lose_node``, ``lose_host``, ``expire_nodes``) — the node is LOST (its NM host
  actor died, or it was silent for ``nm_expiry``): its containers meet the fate of
  ``fault_rules.fate_on_node_lost``, and their AMs ask again.

Fencing (an NM can report only containers it runs): a status for a container the
RM did not place on that node for that app is refused, logged, and the container
killed if the NM says it runs (``Containers.status``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rayrm.rm.core.fault_rules import (NOT_REPORTED, Registration, Resync, nm_lost_detail, nm_registered_detail,
                                       not_reported, on_nm_registers, wall_seconds)
from rayrm.rm.core.model import NodeSpec, Resources
from rayrm.rm.core.scheduler import OnlineScheduler
from rayrm.rm.service.containers import Containers
from rayrm.rm.service.liveness import Heard
from rayrm.rm.service.protocol import (COMPLETE, FENCED, NORMAL, RESYNC, RUNNING, ContainerStatus, HostMark,
                                      NodeHeartbeat, NodeHeartbeatResponse, NodeRegistration)
from rayrm.rm.service.records import RELEASED, NodeRecord
from rayrm.rm.service.runrecords import RunRecords


@dataclass(eq=False, slots=True)
class NodeManagers:
    """The NMs as the RM sees them, and the calls of their hosts (module docstring).

    Contract: ``table`` holds every NM that ever registered or was configured; an alive
    one is in the scheduler's cluster, runs under exactly one host (the one that
    registered it; only that host may speak for it) and is heard through ``liveness``.
    Losing NMs takes them out of the scheduler in one batch (one refresh of every app's
    h, however many NMs).  Methods take the caller's wall time ``now`` and never read a
    clock; the state logs the shares at the end of each call.
    """

    table: dict[str, NodeRecord]
    containers: Containers = field(repr=False)
    scheduler: OnlineScheduler = field(repr=False)
    records: RunRecords = field(repr=False)
    liveness: Heard = field(repr=False)
    resync: Resync = field(repr=False)
    #: host -> its NMs the RM has, or may have, something for (``notify``, ``_news``)
    notice: dict[str, set[str]] = field(default_factory=dict)
    changes: int = 0                     # registrations and losses so far (``Liveness.live_hosts``)

    def register(self, now: float, caller: str, regs: list[NodeRegistration]) -> list[str]:
        """NMs join, come back after being lost, or register again; an action per NM."""
        out = []
        self.settle()                            # the marks so far cover who ran what until now
        # new nodes and lost ones back join the scheduler in one batch (its per-app refresh
        # once, not once per NM: a restarted host registers all its NMs in one call)
        cluster, joining = self.scheduler.cluster, {}
        for reg in regs:
            rec = self.table.get(reg.node)
            if rec is None:
                rec = NodeRecord(NodeSpec(reg.node, Resources(dict(reg.capacity)), dict(reg.attributes)))
                self.table[reg.node] = rec
            idx = cluster.node_index.get(reg.node)
            if not (rec.alive and rec.host != caller) and (idx is None or not cluster.nodes[idx].alive):
                joining.setdefault(reg.node, rec.spec)
        if joining:
            self.scheduler.add_nodes(list(joining.values()))
            self.records.touch_all()
        records = self.records
        for reg in regs:
            rec = self.table[reg.node]
            if rec.alive and rec.host != caller:
                records.refuse(now, "refused", node=reg.node,
                               detail=f"registration from host {caller}; host {rec.host} runs this node")
                out.append(FENCED)
                continue
            verdict = on_nm_registers(not rec.alive, rec.resync)
            rejoin = verdict is Registration.REJOIN
            rec.host, rec.ray_node, rec.alive, rec.last_seen, rec.resync = caller, reg.ray_node, True, now, False
            self.changes += 1
            self.liveness.as_of_host(rec, caller)
            if records.clock is not None:
                if rejoin:
                    records.log.add_node(rec.spec, records.trace(now), records.wall(now), ray_node=reg.ray_node)
                else:
                    records.event(now, verdict.value, node=reg.node, detail=nm_registered_detail(len(reg.running)))
            self._reconcile(now, rec, reg.running, verdict)
            if rec.cleanup:
                self.notify((reg.node,))
            self.resync.registered(("node", reg.node))
            out.append(NORMAL)
        records.resynced(self.resync, now)
        return out

    def _reconcile(self, now: float, rec: NodeRecord, running: tuple[ContainerStatus, ...],
                   verdict: Registration) -> None:
        """Apply what a registering NM reports; lose what it should run and does not
        (``fault_rules.not_reported``)."""
        reported = set()
        for st in running:
            reported.add(st.container)
            self.containers.status(now, rec, st)
        ours = {} if verdict is Registration.REJOIN else \
            {c.container: c for c in self.containers.live(node=rec.spec.name) if c.state == RUNNING}
        for cid in not_reported(verdict, ours, reported):
            self.containers.lose(now, ours[cid], NOT_REPORTED)

    def heartbeat(self, now: float, caller: str, beats: list[NodeHeartbeat], idle: tuple[str, ...],
                  sent: float, mark: HostMark | None = None) -> list[NodeHeartbeatResponse]:
        """NODE_UPDATE for a batch of NMs: apply statuses and answer each NM (the state
        schedules afterwards).

        ``idle`` names NMs of the batch with nothing to report (no statuses, no refusals),
        sent as bare names; they are answered only when the RM has something for them
        (an action other than NORMAL, or containers to clean up), after the ``beats``'
        answers.  ``mark`` (``HostMark``) stands for every other NM the host runs: kept as
        one entry (``Heard.mark``), and the NMs of the host with news (``notice``) answered
        after the rest, so a quiet NM costs nothing here.  ``sent``: the host's wall time
        sending the call (liveness, ``rm/service/liveness.py``).
        """
        self.liveness.call(caller, sent)
        out = [self._beat(now, caller, beat.node, beat, sent) for beat in beats]
        if mark is not None:
            dead = frozenset(mark.dead)
            if self.liveness.dead.get(caller, frozenset()) != dead:
                self.settle((caller,))           # the earlier marks covered NMs this one does not
            self.liveness.mark(caller, now, sent, dead)
            out += self._news(now, caller, {b.node for b in beats} | dead, sent)
            self.records.heartbeats += mark.beats
        # Bare names: the common case — alive, this host's, nothing to clean up — is what
        # ``_beat`` does for it, without building an answer nobody receives.
        nodes, calls, quiet = self.table, self.liveness.host_calls.get(caller, 0), 0
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
        self.records.heartbeats += quiet
        return out

    def _news(self, now: float, caller: str, skip: set[str] | frozenset[str],
              sent: float) -> list[NodeHeartbeatResponse]:
        """Answers for the NMs of ``caller`` that the RM has something for (``notice``):
        RESYNC to one lost or awaiting resync, containers to clean up; none for those in
        ``skip`` (answered by name in this call, or stopped)."""
        names = self.notice.pop(caller, None)
        if not names:
            return []
        out = []
        for name in sorted(names - skip):
            rec = self.table.get(name)
            if rec is None or rec.host != caller:
                continue                         # another host runs it now: nothing to say here
            resp = self._beat(now, caller, name, None, sent) if rec.alive else NodeHeartbeatResponse(name, RESYNC)
            if resp.action != NORMAL or resp.cleanup:
                out.append(resp)
        return out

    def notify(self, names) -> None:
        """The RM has, or may have, something for these NMs (containers to clean up, a
        RESYNC): their host's next marked call answers them (``_news``)."""
        table, notice = self.table, self.notice
        for name in names:
            rec = table.get(name)
            if rec is not None and rec.host:
                notice.setdefault(rec.host, set()).add(name)

    def settle(self, hosts=None) -> None:
        """Fold each host's latest mark (of ``hosts``, or all) into its live NMs' records, as
        if the call had carried each NM the mark covers (``Heard.carried``): run before the
        records are read (liveness scans, expiry, the UI) or who runs what changes (a
        registration, a loss, a restart), so a mark only ever covers the NMs it was sent for."""
        marked, dead, fold = self.liveness.marked, self.liveness.dead, self.liveness.fold
        if hosts is not None:
            marks = {h: marked.pop(h) for h in hosts if h in marked}
        else:
            marks, self.liveness.marked = marked, {}
        if not marks:
            return
        for name, rec in self.table.items():
            m = marks.get(rec.host) if rec.alive else None
            if m is not None and name not in dead.get(rec.host, ()):
                fold(rec, m)

    def _beat(self, now: float, caller: str, name: str, beat: NodeHeartbeat | None,
              sent: float = 0.0) -> NodeHeartbeatResponse:
        rec = self.table.get(name)
        if rec is None or not rec.alive:
            return NodeHeartbeatResponse(name, RESYNC)
        if rec.host != caller:
            self.records.refuse(now, "refused", node=name,
                                detail=f"heartbeat from host {caller}; host {rec.host} runs this node")
            return NodeHeartbeatResponse(name, FENCED)
        rec.last_seen = now
        self.liveness.carried(rec, caller, sent)
        if rec.resync:
            return NodeHeartbeatResponse(name, RESYNC)
        self.records.heartbeats += 1
        acks = ()
        if beat is not None:
            for cid, app, why in beat.refused:
                self.records.refuse(now, "refused", app=app, container=cid, node=name,
                                    detail=f"launch refused by the NM: {why}")
            acks = tuple(st.container for st in beat.statuses if self.containers.status(now, rec, st))
        cleanup = ()
        if rec.cleanup:
            cleanup, rec.cleanup = tuple(rec.cleanup), []
        return NodeHeartbeatResponse(name, NORMAL, cleanup, acks)

    # ----- NMs lost --------------------------------------------------------------------

    def lose(self, now: float, gone: list[tuple[str, str]]) -> list[int]:
        """NMs (name, why) LOST together; returns their containers' ids.  The scheduler
        drops them in one batch: losing an NM host's 1,000 NMs costs one refresh of
        every app, not 1,000 (each touching every app)."""
        gone = [(n, why) for n, why in gone if n in self.table and self.table[n].alive]
        if not gone:
            return []
        for name, _ in gone:
            rec = self.table[name]
            rec.alive, rec.resync, rec.cleanup = False, False, []
            self.resync.registered(("node", name))
        self.changes += 1
        self.scheduler.remove_nodes([n for n, _ in gone])     # releases their containers there
        self.records.touch_all()
        lost = []
        records = self.records
        for name, detail in gone:
            records.log.remove_node(name, records.trace(now), records.wall(now), detail=detail)
            for c in self.containers.live(node=name):
                if c.state not in (COMPLETE, RELEASED):
                    lost.append(c.container)
                    self.containers.lose(now, c, detail)
        records.resynced(self.resync, now)
        return lost

    def on_host(self, host: str) -> list[str]:
        """The live NMs host ``host`` runs."""
        return [n for n, r in self.table.items() if r.alive and r.host == host]

    def expire(self, now: float, expiry_wall: float, names: list[str] | None = None) -> list[str]:
        """NMs silent for longer than ``expiry_wall`` seconds are LOST; returns their names.

        ``names``: the NMs the RM decided are silent (``rm/service/liveness.py``: only
        silence it could have heard counts); without it, wall-clock silence.
        """
        table = self.table
        gone = [n for n, r in table.items() if r.alive and now - r.last_seen > expiry_wall] \
            if names is None else [n for n in names if n in table and table[n].alive]
        self.lose(now, [(n, nm_lost_detail(now - table[n].last_seen, wall_seconds)) for n in gone])
        return gone
