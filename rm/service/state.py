"""The ResourceManager's protocol state: plain synchronous Python, no Ray, no clock reads.

``ResourceManagerState`` is what the Ray actor (``rm/runtime/actor.py``) wraps.  Every
public method takes ``now`` (a wall time read by the caller) plus the call's
``caller`` and ``request_id`` and nothing else from the outside world, so the
state after a sequence of calls is a function of that sequence: a journal of
calls replayed onto a snapshot rebuilds it (``rm/service/store.py``: the RM restart),
and tests drive it without Ray.

The protocol is YARN's (rm/service/protocol.py has the messages); the NodeManager side
is in ``rm/service/nodes.py``, the ApplicationMaster side in ``rm/service/apps.py``:

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
* Fencing: a call for a node another host runs, a status for a container the
  node does not run, a call from an attempt that is not the app's current one,
  a release of another app's container — each is refused and logged
  (events.csv ``refused`` or ``fenced``).

Idempotence: the response to each caller's latest ``request_id`` is kept; the
same id again gets the same response and changes nothing.  The kept responses
are part of the state, so this holds across an RM restart too.
"""

from __future__ import annotations

from rayrm.rm.core.fault_rules import Resync, wall_seconds
from rayrm.rm.core.model import NodeSpec
from rayrm.rm.core.policies import Policy
from rayrm.rm.service.protocol import COMPLETE, RUNNING, Allocation, Call, container_token
from rayrm.rm.service.apps import AppProtocol
from rayrm.rm.service.nodes import NodeProtocol
from rayrm.rm.service.records import RELEASED, AppRecord, ContainerRecord, NodeRecord, idempotent
from rayrm.rm.runs.log import RunLog, app_shares
from rayrm.rm.core.scheduler import OnlineScheduler


class ResourceManagerState(NodeProtocol, AppProtocol):
    """Scheduler + protocol bookkeeping + run log, driven by explicit calls (see module doc)."""

    def __init__(self, *, dims, nodes: list[NodeSpec], policy: Policy | str, policy_name: str,
                 time_scale: float, name: str = "", seed: int | None = None,
                 max_attempts: int = 2, secret: bytes = b""):
        self.scheduler = OnlineScheduler(policy, dims, nodes)
        self.log = RunLog(tuple(dims), mode="ray", policy=policy_name, name=name, seed=seed)
        self.time_scale = float(time_scale)
        self.max_attempts = int(max_attempts)
        self.secret = secret
        self.start_wall: float | None = None
        self.nodes: dict[str, NodeRecord] = {n.name: NodeRecord(n) for n in nodes}
        self.apps: dict[str, AppRecord] = {}
        self.launching_apps: set[str] = set()   # attempts started, not registered (the AM launcher's work)
        self.failed_app_ids: set[str] = set()   # apps that ended with tasks unfinished
        self.containers: dict[int, ContainerRecord] = {}
        # live containers (neither COMPLETE nor RELEASED) by app and by node, so that failing
        # an app, losing a node or resyncing touches only their own (issue 11)
        self.live_by_app: dict[str, set[int]] = {}
        self.live_by_node: dict[str, set[int]] = {}
        self.running_count = 0
        self._responses: dict[str, tuple[int, object]] = {}
        self.caller_seen: dict[str, float] = {}    # host (caller) -> when its last call was applied
        self.host_sent: dict[str, float] = {}      # host -> send time of its latest heartbeat / allocate
        self.host_calls: dict[str, int] = {}       # host -> heartbeats / allocates it has sent
        self.news: set[str] = set()          # AM hosts with something to deliver
        self.total_tasks = 0
        self.finished = 0
        self.allocations = 0
        self.heartbeats = 0
        self.duplicate_finishes = 0
        self.refused = 0
        self.resync = Resync(wall_seconds)   # RM restarts recovered so far, and who must register again
        self.recoveries: list[dict] = []     # per RM restart: snapshot and journal size, restore time
        self.alloc_to_running: list[float] = []   # wall seconds, payload start - allocation
        self.alloc_to_launch: list[float] = []    # wall seconds, NM launch - allocation
        self._touched: set[str] = set()
        self._touched_all = False
        self._last_share_time = 0.0

    # ----- time ----------------------------------------------------------------

    def trace(self, now: float) -> float:
        """trace time = (wall - start) / time_scale; 0 before the clock starts."""
        return 0.0 if self.start_wall is None else max(0.0, (now - self.start_wall) / self.time_scale)

    def wall(self, now: float) -> float:
        return 0.0 if self.start_wall is None else now - self.start_wall

    def start_clock(self, now: float, start_wall: float) -> None:
        """t = 0: the NMs registered so far join the run log at time 0."""
        self.start_wall = start_wall
        for rec in self.nodes.values():
            if rec.alive:
                self.log.add_node(rec.spec, 0.0, 0.0, ray_node=rec.ray_node)

    # ----- dispatch --------------------------------------------------------------

    def apply(self, call: Call, now: float, *args):
        """Run one protocol call (the actor's dispatch and the journal's replay)."""
        return _DISPATCH[call](self, now, *args)

    def _event(self, now: float, kind: str, **where) -> None:
        self.log.event(kind, self.trace(now), self.wall(now), **where)

    def _refuse(self, now: float, kind: str, **where) -> None:
        """Fencing: a call was refused; counted and logged (``refused`` or ``fenced``)."""
        self.refused += 1
        self._event(now, kind, **where)

    # ----- faults and the RM's own restart ---------------------------------------

    @idempotent
    def fault(self, now: float, caller: str, request_id: int, spec: str, node: str = "",
              app: str = "") -> None:
        """A fault is about to be injected (events.csv ``fault``), logged before it happens."""
        self._event(now, "fault", node=node, app=app, detail=spec)

    def recovered(self, now: float, detail: str = "", grace: float = 0.0, stats: dict | None = None) -> None:
        """The RM restarted and rebuilt this state: every NM and AM must RESYNC.

        Liveness restarts ``grace`` seconds after ``now``: the RM's downtime is
        nobody's silence, and a caller whose call was out when the RM died learns
        of it only some time after the restart (about a second on Ray 2.60).
        ``rm_recovered`` is logged now and ``rm_resynced`` once every live NM and
        every running AM attempt has registered again.
        """
        text = self.resync.recovered(now, detail)
        self.recoveries.append(dict(stats or {}, epoch=self.resync.epoch))
        nodes = [n for n, r in self.nodes.items() if r.alive]
        apps = {a for a, r in self.apps.items() if not r.done and not r.launching}
        self.resync.wait_for([("node", n) for n in nodes] + [("app", a) for a in apps])
        for n in nodes:
            self.nodes[n].resync, self.nodes[n].last_seen = True, now + grace
            self.nodes[n].last_sent = self.host_sent.get(self.nodes[n].host, 0.0) + grace
            self.nodes[n].last_call = self.host_calls.get(self.nodes[n].host, 0)
        for a, r in self.apps.items():
            r.resync = a in apps
            r.last_seen = now + grace
            r.last_sent = self.host_sent.get(r.host, 0.0) + grace
            r.last_call = self.host_calls.get(r.host, 0)
        self._event(now, "rm_recovered", detail=text)
        self._check_resynced(now)

    def _check_resynced(self, now: float) -> None:
        detail = self.resync.check(now)
        if detail is not None:
            self._event(now, "rm_resynced", detail=detail)

    # ----- scheduling and shares -----------------------------------------------

    def _schedule(self, now: float) -> None:
        for c in self.scheduler.schedule():
            self._add_container(ContainerRecord(c.container_id, c.app_id, c.node, now))
            app = self.apps[c.app_id]
            node = self.nodes[c.node]
            token = container_token(self.secret, c.container_id, c.app_id, c.node) if self.secret else ""
            app.undelivered.append(Allocation(c.container_id, c.app_id, c.node, node.host, now, token))
            self.news.add(app.host)
            self._touched.add(c.app_id)
            self.allocations += 1

    def _touch_all(self) -> None:
        """Nodes joined or left: every app's h (and so its shares) may have changed
        (expanded once, in ``_after``, however many nodes changed in the call)."""
        self._touched_all = True

    def _after(self, now: float) -> None:
        """Log share rows for apps whose running count or h changed (shares.csv)."""
        if self._touched_all:
            self._touched.update(a for a, r in self.apps.items() if not r.done)
            self._touched_all = False
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

    def _host_sent(self, caller: str, sent: float) -> None:
        """A heartbeat or allocate of host ``caller`` sent at ``sent`` (liveness)."""
        if sent:
            self.host_sent[caller] = max(sent, self.host_sent.get(caller, 0.0))
            self.host_calls[caller] = self.host_calls.get(caller, 0) + 1

    def _carried(self, rec, caller: str, sent: float) -> None:
        """``rec`` (an NM or AM record) was in a call its host sent at ``sent``."""
        if sent:
            rec.last_sent, rec.last_call = sent, self.host_calls.get(caller, 0)

    def _as_of_host(self, rec, host: str) -> None:
        """Start ``rec``'s silence from its host's latest call (registered, launched, restarted)."""
        rec.last_sent, rec.last_call = self.host_sent.get(host, 0.0), self.host_calls.get(host, 0)

    @property
    def pending_asks(self) -> int:
        return sum(a.pending for a in self.scheduler.cluster.apps.values())

    @property
    def running(self) -> int:
        return self.running_count

    # ----- containers and their indexes ---------------------------------------------

    def _add_container(self, rec: ContainerRecord) -> None:
        self.containers[rec.container] = rec
        self.live_by_app.setdefault(rec.app, set()).add(rec.container)
        self.live_by_node.setdefault(rec.node, set()).add(rec.container)

    def _set_state(self, c: ContainerRecord, state: str) -> None:
        """Move a container to ``state``, keeping the live indexes and the running count."""
        self.running_count += (state == RUNNING) - (c.state == RUNNING)
        c.state = state
        if state in (COMPLETE, RELEASED):
            for index, key in ((self.live_by_app, c.app), (self.live_by_node, c.node)):
                ids = index.get(key)
                if ids is not None:
                    ids.discard(c.container)
                    if not ids:
                        del index[key]

    def live(self, *, app: str | None = None, node: str | None = None) -> list[ContainerRecord]:
        """The live containers of one app or one node, in container id order (allocation
        order: what iterating every container used to give, whatever the set's layout)."""
        ids = self.live_by_app.get(app, ()) if app is not None else self.live_by_node.get(node, ())
        return [self.containers[i] for i in sorted(ids)]

    def progress(self, now: float) -> dict:
        return {"time": round(self.trace(now), 3), "running": self.running,
                "allocated": len(self.scheduler.cluster.containers), "finished": self.finished,
                "total_tasks": self.total_tasks, "pending": self.pending_asks,
                "allocations": self.allocations, "heartbeats": self.heartbeats,
                "duplicate_finishes": self.duplicate_finishes, "refused": self.refused,
                "nodes_alive": sum(1 for r in self.nodes.values() if r.alive), "epoch": self.resync.epoch,
                "hosts_alive": sorted({r.host for r in self.nodes.values() if r.alive})}


_DISPATCH = {
    Call.REGISTER_NODES: ResourceManagerState.register_nodes,
    Call.NODE_HEARTBEAT: ResourceManagerState.node_heartbeat,
    Call.REGISTER_APPS: ResourceManagerState.register_apps,
    Call.ALLOCATE: ResourceManagerState.allocate,
    Call.FINISH_APPS: ResourceManagerState.finish_apps,
    Call.POLL: ResourceManagerState.poll,
    Call.LOSE_NODE: ResourceManagerState.lose_node,
    Call.LOSE_HOST: ResourceManagerState.lose_host,
    Call.LOSE_AM_HOST: ResourceManagerState.lose_am_host,
    Call.FAULT: ResourceManagerState.fault,
    Call.START_CLOCK: ResourceManagerState.start_clock,
    Call.EXPIRE_NODES: ResourceManagerState.expire_nodes,
    Call.EXPIRE_APPS: ResourceManagerState.expire_apps,
    Call.RECOVERED: ResourceManagerState.recovered,
}
assert set(_DISPATCH) == set(Call), "every Call has a state method"
