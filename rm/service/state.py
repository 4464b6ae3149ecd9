"""The ResourceManager's protocol state: plain synchronous Python, no Ray, no clock reads.

``ResourceManagerState`` is what the Ray actor (``rm/runtime/actor.py``) wraps.  Every
public method takes ``now`` (a wall time read by the caller) plus the call's
``caller`` and ``request_id`` and nothing else from the outside world, so the
state after a sequence of calls is a function of that sequence: a journal of
calls replayed onto a snapshot rebuilds it (``rm/service/store.py``: the RM restart),
and tests drive it without Ray.

The state is a few parts, each a class with declared fields and its contract in its
docstring, wired together here and nowhere else:

    nodes       NodeManagers (rm/service/nodes.py): the NMs and their hosts' calls
    apps        AppMasters (rm/service/apps.py): the apps, their attempts, the AM hosts' calls
    containers  Containers (rm/service/containers.py): every container and its life
    liveness    Heard (rm/service/liveness.py): what the RM heard from each host, and when
    resync      fault_rules.Resync: who a restarted RM waits for
    records     RunRecords (rm/service/runrecords.py): the run log, its clock, the counters
    preemptions Preemptions (rm/service/containers.py): the containers the RM takes back
    scheduler   OnlineScheduler (rm/core/scheduler.py): the offer rule and its policy

Its public methods are the protocol's calls, typed: each is the handler of one row of the
RM's table of calls (``Call``, rm/service/calls.py), through which the actor applies and
journals it and a journal record is replayed.  What a lost or returning NM, AM or RM means is
``rayrm.rm.core.fault_rules``, which the simulator follows too.  The protocol is YARN's
(rm/service/protocol.py has the messages):

* NODE_UPDATE — ``node_heartbeat``: the NM's container statuses are applied,
  then the scheduler runs and what it places is queued for the AMs.
* AM heartbeat — ``allocate``: releases, the app's outstanding ask, and the
  containers allocated and statuses completed since the last call.
* Liveness (YARN's NMLivelinessMonitor and AMLivelinessMonitor): an NM silent
  for ``nm_expiry`` is LOST (``expire_nodes``; also ``lose_node`` and
  ``lose_host`` when its host actor died); an AM attempt silent for
  ``am_expiry`` FAILS (``expire_apps``) and the RM starts the next attempt, up to
  ``max_attempts``, keeping the app's finished tasks and running containers.
* RM restart — ``recovered``: after the state is rebuilt, every NM and AM is
  told RESYNC on its next call and registers again; ``rm_resynced`` is logged
  once all of them have.
* Preemption (off unless a ``preemption`` rule set is given) — ``preempt``, the RM's own
  call at each monitor tick: the rules decide, the AMs of their victims are warned (a
  ``PreemptionMessage`` in their next allocate answer), and at the deadline the victims'
  NMs kill them; a killed container's attempt ends ``preempted``.
* Fencing: a call for a node another host runs, a status for a container the
  node does not run, a call from an attempt that is not the app's current one,
  a release of another app's container — each is refused and logged
  (events.csv ``refused`` or ``fenced``).

Idempotence: the response to each caller's latest ``request_id`` is kept; the
same id again gets the same response and changes nothing.  The kept responses
are part of the state, so this holds across an RM restart too.
"""

from __future__ import annotations

from rayrm.rm.core.clock import TraceClock
from rayrm.rm.core.fault_rules import Resync, wall_seconds
from rayrm.rm.core.model import NodeSpec
from rayrm.rm.core.policies import Policy
from rayrm.rm.core.queues.tree import QueueTree
from rayrm.rm.core.scheduler import OnlineScheduler
from rayrm.rm.core.queues.scheduler import make_scheduler
from rayrm.rm.runs.log import RunLog
from rayrm.rm.service.apps import AppMasters
from rayrm.rm.service.containers import Containers, Preemptions
from rayrm.rm.service.liveness import Heard
from rayrm.rm.service.nodes import NodeManagers
from rayrm.rm.service.protocol import (Allocation, AllocateRequest, AllocateResponse, AppMark, AppRegistered,
                                      AppRegistration, HostMark, NodeHeartbeat, NodeHeartbeatResponse,
                                      NodeRegistration, container_token)
from rayrm.rm.service.records import ACQUIRED, NOT_ANSWERED, ContainerRecord, NodeRecord, answered, idempotent
from rayrm.rm.service.runrecords import RunRecords


class ResourceManagerState:
    """Scheduler + protocol bookkeeping + run log, driven by explicit calls (see module doc).

    ``responses`` keeps each caller's latest (request id, answer) for idempotence;
    ``recoveries`` one dict per RM restart (snapshot and journal sizes, restore time);
    ``secret`` signs container tokens (empty: no tokens); ``preemption``: the preemption
    rules (``decide(now, scheduler) -> victims``, rm/core), None for none.
    """

    __slots__ = ("scheduler", "records", "liveness", "resync", "containers", "nodes", "apps", "secret",
                 "responses", "recoveries", "preemptions")
    scheduler: OnlineScheduler
    records: RunRecords
    liveness: Heard
    resync: Resync
    containers: Containers
    nodes: NodeManagers
    apps: AppMasters
    secret: bytes
    responses: dict[str, tuple[int, object]]
    recoveries: list[dict]
    preemptions: Preemptions

    def __init__(self, *, dims, nodes: list[NodeSpec], policy: Policy | str, policy_name: str,
                 name: str = "", seed: int | None = None, max_attempts: int = 2, secret: bytes = b"",
                 queues: QueueTree | None = None, preemption=None):
        self.scheduler = scheduler = make_scheduler(policy, dims, nodes, queues)
        self.records = records = RunRecords(RunLog(tuple(dims), mode="ray", policy=policy_name, name=name,
                                                   seed=seed))
        if queues is not None and not queues.flat:
            records.log.queues = queues.to_list()
        self.liveness, self.resync = Heard(), Resync(wall_seconds)
        apps, news, notice = {}, set(), {}
        self.containers = Containers(scheduler, records, apps, news, notice)
        self.nodes = NodeManagers({n.name: NodeRecord(n) for n in nodes}, self.containers, scheduler, records,
                                  self.liveness, self.resync)
        self.apps = AppMasters(apps, news, notice, self.nodes.table, self.containers, scheduler, records, self.liveness,
                               self.resync, int(max_attempts))
        self.preemptions = Preemptions(preemption, self.containers, self.nodes.table, self.nodes.notice, apps,
                                       records)
        if preemption is not None:
            self.containers.preemptions = self.preemptions
        self.secret = secret
        self.responses = {}
        self.recoveries = []

    # ----- the NM hosts' calls ----------------------------------------------------

    @idempotent
    def register_nodes(self, now: float, caller: str, request_id: int,
                       regs: list[NodeRegistration]) -> list[str]:
        """NMs join, come back after being lost, or register again; an action per NM."""
        out = self.nodes.register(now, caller, regs)
        self._after(now)
        return out

    @idempotent
    def node_heartbeat(self, now: float, caller: str, request_id: int, beats: list[NodeHeartbeat],
                       idle: tuple[str, ...] = (), sent: float = 0.0,
                       mark: HostMark | None = None) -> list[NodeHeartbeatResponse]:
        """NODE_UPDATE for a batch of NMs (``NodeManagers.heartbeat``; ``mark``: the host's
        other NMs, ``HostMark``), then the scheduler runs."""
        out = self.nodes.heartbeat(now, caller, beats, idle, sent, mark)
        self._schedule(now)
        self._after(now)
        return out

    # ----- the AM hosts' calls ----------------------------------------------------

    @idempotent
    def register_apps(self, now: float, caller: str, request_id: int,
                      regs: list[AppRegistration]) -> list[AppRegistered]:
        """Apps arrive or attempts (re-)register (``AppMasters.register``)."""
        out = self.apps.register(now, caller, regs)
        self._after(now)
        return out

    @idempotent
    def allocate(self, now: float, caller: str, request_id: int, requests: list[AllocateRequest],
                 sent: float = 0.0, mark: AppMark | None = None) -> list[AllocateResponse]:
        """AM heartbeats: releases, absolute asks, and what is waiting (``AppMasters.allocate``;
        ``mark``: the host's idle AMs, ``AppMark``)."""
        out = self.apps.allocate(now, caller, requests, sent, mark)
        self._after(now)
        return out

    def poll(self, now: float, caller: str, request_id: int, requests: list[AllocateRequest],
             mark: AppMark | None = None) -> list[AllocateResponse]:
        """Deliver what arrived since ``allocate`` answered the same request (the long poll).

        A request already answered with containers or statuses (a retry raced the
        first, or the first answer was lost) gets that answer again, never a second
        delivery.
        """
        cached = answered(self.responses, caller, request_id)
        if cached is not NOT_ANSWERED and any(r.allocated or r.completed or r.preemption for r in cached):
            return cached
        out = self.apps.poll(now, caller, requests, mark)
        if cached is not NOT_ANSWERED and any(r.allocated or r.completed or r.preemption for r in out):
            # what the poll delivers is the request's answer: a retry whose first answer was
            # lost on the way gets these containers again, not a second, empty delivery
            self.responses[caller] = (request_id, out)
        return out

    @idempotent
    def finish_apps(self, now: float, caller: str, request_id: int, items: list[tuple[str, int]]) -> list[str]:
        """AMs unregister (YARN FinishApplicationMaster); containers left are cleaned up."""
        self._notify_nodes_of(a for a, _ in items)
        out = self.apps.finish(now, items)
        self._after(now)
        return out

    # ----- faults: the driver's calls and the RM's own liveness -----------------------

    def lose_node(self, now: float, node: str, detail: str = "lost", departed: bool = False) -> list[int]:
        """The NM is LOST (``departed``: it left the cluster for good, so an app only it could
        run is rejected from now on): its containers are reported lost to their AMs;
        returns their ids."""
        self.nodes.settle()
        if departed and node in self.nodes.table:
            self.scheduler.cluster.depart([node])
        lost = self.nodes.lose(now, [(node, detail)])
        self.nodes.notify((node,))
        self._after(now)
        return lost

    @idempotent
    def lose_host(self, now: float, caller: str, request_id: int, host: str,
                  detail: str = "NM host died") -> list[str]:
        """Every NM the host ``host`` runs is LOST (its actor died); returns their names."""
        self.nodes.settle()
        gone = self.nodes.on_host(host)
        self.nodes.lose(now, [(n, detail) for n in gone])
        self.nodes.notify(gone)
        self._after(now)
        return gone

    @idempotent
    def lose_am_host(self, now: float, caller: str, request_id: int, host: str,
                     detail: str = "AM host died", ray_node: str = "") -> list[str]:
        """Every current attempt AM host ``host`` ran fails, uncounted (``AppMasters.lose_host``;
        ``ray_node``: the host's Ray node, gone)."""
        gone = self.apps.lose_host(now, host, detail, ray_node)
        if gone:
            self.nodes.notify(self.nodes.table)      # its attempts' containers may be cleaned up anywhere
        self._after(now)
        return gone

    def expire_nodes(self, now: float, expiry_wall: float, names: list[str] | None = None) -> list[str]:
        """NMs silent for longer than ``expiry_wall`` are LOST (``NodeManagers.expire``)."""
        self.nodes.settle()
        gone = self.nodes.expire(now, expiry_wall, names)
        self.nodes.notify(gone)
        self._after(now)
        return gone

    def expire_apps(self, now: float, expiry_wall: float, names: list[str] | None = None) -> list[str]:
        """Attempts silent for longer than ``expiry_wall`` fail (``AppMasters.expire``)."""
        gone = self.apps.expire(now, expiry_wall, names)
        if gone:
            self.nodes.notify(self.nodes.table)      # their containers may be cleaned up anywhere
        self._after(now)
        return gone

    def expire_allocations(self, now: float, ids: list[int], detail: str = "") -> list[int]:
        """Containers delivered and never reported running (``fault_rules.ALLOCATION_EXPIRIES``,
        the actor decides which) are reported lost to their AMs; returns those still ACQUIRED."""
        out = []
        for cid in ids:
            c = self.containers.table.get(cid)
            if c is not None and c.state == ACQUIRED:
                self.records.event(now, "allocation_expired", app=c.app, container=cid, node=c.node, detail=detail)
                self.containers.lose(now, c, f"allocation expired: {detail}")
                out.append(cid)
        self._after(now)
        return out

    def preempt(self, now: float) -> tuple[list[int], list[int]]:
        """Preemption's turn (the RM's monitor, each tick): the rules decide at ``now``
        (``Preemptions.decide``) and each new victim's AM is told, in its next allocate
        answer, that the container is killed at its deadline; then the warned containers
        whose deadline has come are killed by their NMs (``cleanup``).  The rules' clocks
        (how long a queue has starved) change here and only here, so the state stays a
        function of its calls; returns the containers warned and those killed."""
        p = self.preemptions
        warned = p.warn(now, p.decide(now, self.scheduler))
        killed = p.kill(now, p.due(now))
        self._after(now)
        return warned, killed

    @idempotent
    def fault(self, now: float, caller: str, request_id: int, spec: str, node: str = "",
              app: str = "") -> None:
        """A fault is about to be injected (events.csv ``fault``), logged before it happens."""
        self.records.event(now, "fault", node=node, app=app, detail=spec)

    def recovered(self, now: float, detail: str = "", grace: float = 0.0, stats: dict | None = None) -> None:
        """The RM restarted and rebuilt this state: every NM and AM must RESYNC.

        Liveness restarts ``grace`` seconds after ``now``: the RM's downtime is
        nobody's silence, and a caller whose call was out when the RM died learns
        of it only some time after the restart (about a second on Ray 2.60).
        ``rm_recovered`` is logged now and ``rm_resynced`` once every live NM and
        every running AM attempt has registered again (``fault_rules.Resync``).
        """
        self.nodes.settle()
        self.apps.settle()
        text = self.resync.recovered(now, detail)
        self.recoveries.append(dict(stats or {}, epoch=self.resync.epoch))
        nodes = [r for r in self.nodes.table.values() if r.alive]
        apps = {a for a, r in self.apps.table.items() if not r.done and not r.launching}
        self.resync.restart([r.spec.name for r in nodes], apps)
        for r in nodes:
            r.resync, r.last_seen = True, now + grace
            self.liveness.as_of_host(r, r.host, grace)
        for a, r in self.apps.table.items():
            r.resync = a in apps
            r.last_seen = now + grace
            self.liveness.as_of_host(r, r.host, grace)
            if r.resync:
                self.containers.tell(r, wake=False)       # RESYNC, at its host's next allocate
        self.preemptions.resend()                        # kills issued and not yet confirmed
        self.nodes.notify(r.spec.name for r in nodes)    # RESYNC each, named or marked
        self.records.event(now, "rm_recovered", detail=text)
        self.records.resynced(self.resync, now)

    # ----- the clock and the scheduler ------------------------------------------------

    def start_clock(self, now: float, clock: TraceClock) -> None:
        """t = 0 at ``clock.start``: the NMs registered so far join the run log at time 0."""
        self.records.clock = clock
        for rec in self.nodes.table.values():
            if rec.alive:
                self.records.log.add_node(rec.spec, 0.0, 0.0, ray_node=rec.ray_node)

    def _schedule(self, now: float) -> None:
        """The offer rule runs; what it places is queued for the apps' AMs (undelivered)."""
        apps, nodes, records, tell = self.apps.table, self.nodes.table, self.records, self.containers.tell
        for c in self.scheduler.schedule():
            self.containers.add(ContainerRecord(c.container_id, c.app_id, c.node, now))
            app = apps[c.app_id]
            node = nodes[c.node]
            token = container_token(self.secret, c.container_id, c.app_id, c.node) if self.secret else ""
            app.undelivered.append(Allocation(c.container_id, c.app_id, c.node, node.host, now, token))
            tell(app)
            records.touched.add(c.app_id)
            records.allocations += 1

    def _notify_nodes_of(self, apps) -> None:
        """The nodes running containers of ``apps`` may get some to clean up (``NodeManagers.notify``)."""
        by_app, table = self.containers.by_app, self.containers.table
        self.nodes.notify({table[i].node for a in apps for i in by_app.get(a, ())})

    def _after(self, now: float) -> None:
        """The end of a call: share rows for the apps it touched (``RunRecords.shares``)."""
        self.records.shares(now, self.scheduler.cluster, self.apps.table)

    # ----- views ---------------------------------------------------------------------

    @property
    def log(self) -> RunLog:
        return self.records.log

    @property
    def clock(self) -> TraceClock | None:
        """The replay's trace clock, once it has started (``start_clock``)."""
        return self.records.clock

    @property
    def alloc_to_running(self) -> list[float]:
        """Wall seconds from each allocation to its payload starting."""
        return self.records.alloc_to_running

    @property
    def alloc_to_launch(self) -> list[float]:
        """Wall seconds from each allocation to its NM launching it."""
        return self.records.alloc_to_launch

    @property
    def running(self) -> int:
        """Containers the NMs report RUNNING."""
        return self.containers.running

    @property
    def pending_asks(self) -> int:
        """Tasks asked for and not yet placed."""
        return sum(a.pending for a in self.scheduler.cluster.apps.values())

    def pending_launches(self) -> list[tuple[str, str, int]]:
        """(AM host, app, attempt) of every attempt the RM started that has not registered."""
        return self.apps.pending_launches()

    def failed_apps(self) -> list[tuple[str, str]]:
        """(AM host, app) of every app that ended without all its tasks finished."""
        return self.apps.failed_apps()

    def progress(self, now: float) -> dict:
        r, nodes = self.records, self.nodes.table
        return {"time": round(r.trace(now), 3), "running": self.running,
                "allocated": len(self.scheduler.cluster.containers), "finished": r.finished,
                "total_tasks": r.total_tasks, "pending": self.pending_asks,
                "allocations": r.allocations, "heartbeats": r.heartbeats,
                "duplicate_finishes": r.duplicate_finishes, "refused": r.refused,
                "nodes_alive": sum(1 for n in nodes.values() if n.alive), "epoch": self.resync.epoch,
                "hosts_alive": sorted({n.host for n in nodes.values() if n.alive})}

