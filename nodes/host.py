"""NodeManager host: many logical NodeManagers in one async actor on one Ray node.

Each logical NM has its own capacity, attributes and heartbeat schedule (phases spread
over the interval so a host's NMs do not all beat at once).  The host batches: one
``node_heartbeat`` call to the RM carries every NM that is due, and an NM whose container
just completed beats *out of band* at once (YARN's ``sendOutOfBandHeartBeat``), so the RM
reschedules freed resources without waiting for the next interval.  A host has one RM
call in flight at a time, numbered by ``request_id``; a failed one is retried as it was.

What an NM reports (YARN NodeStatus): a container once as RUNNING when launched, and as
COMPLETE until the RM acknowledges it (``ack``).  It kills what the RM lists in
``cleanup``.

Regular heartbeats go out in slots (``HeartbeatSlots``, nodes/slots.py): the host's NMs
are dealt into about ten slots per interval whose phases spread over it, and a slot's NMs
beat in one call, so the loop does per-slot, not per-NM, work.  Inside a call only the NMs
with something to report (statuses, refused launches) go by name; every other NM of the
host is in the call's one ``HostMark`` (all but those it knows have stopped), so a quiet
NM costs neither the host nor the RM anything per beat, and a crashed one, left out of
the marks, expires as a silent NM.

Calls are bounded per host, not per slot or per completion: two start at least
``MIN_CALL_GAP`` (10 ms, at most half an interval) apart, and what falls due meanwhile —
out-of-band completions (600 a wall second at paper scale and 0.02), slots due — goes in
the next call, at most 100 a second.  A call with nothing but the mark takes the slots due
within the next interval: a quiet host calls once an interval (each NM beating once, up
to an interval early), a host with news as soon as the gap allows.  The cost: an ask made
while every host is quiet waits up to an interval for its NODE_UPDATE, not half of one;
jobs arrive while hosts are busy, and in a trace's tail the RM answers a third fewer calls.

Containers are ``HostContainers``' (nodes/containers.py): started on an AM's granted,
token-checked launch, watched to their end, killed on the RM's cleanup.

Failures.  A RESYNC answer (the RM restarted, or declared the NM lost)
makes the NM register again listing the containers it still runs and the completions not
yet acknowledged (YARN's NMContainerStatus).  ``kill_nm`` crashes one logical NM (its
containers die, it stops heartbeating; the RM finds out by heartbeat expiry) and, with
``restart_after``, starts it again empty that many seconds later.  When the whole host
actor dies, Ray restarts it (``max_restarts``); the driver, told by ``lifeline`` failing,
declares its NMs lost and calls ``resume``, which registers them again.

Measured per host for benchmarks: heartbeats sent and answered, round trip (sent ->
answer), lag (due -> answered, one sample per slot; negative when sent early), and the
backlog (NMs overdue by more than one interval when a batch goes out).
"""

from __future__ import annotations

import asyncio
import time

import ray

from rayrm.nodes.containers import HostContainers
from rayrm.nodes.executors import Launcher
from rayrm.nodes.nm import NodeManagerState
from rayrm.nodes.slots import MIN_BATCH_WINDOW, HeartbeatSlots
from rayrm.rm.core.clock import TraceClock
from rayrm.rm.core.model import NodeSpec
from rayrm.rm.service.client import RMClient
from rayrm.rm.service.heap import quiet_gc
from rayrm.rm.service.protocol import NAMESPACE, NORMAL, RESYNC, RUNNING, ContainerLaunch, HostMark, NodeHeartbeat

#: the least wall time between the starts of two node_heartbeat calls of one host (module docstring)
MIN_CALL_GAP = 0.010


@ray.remote(num_cpus=0, max_concurrency=10_000)
class NodeManagerHost:
    """Logical NMs of one Ray node (see the module docstring)."""

    def __init__(self, host_id: str, rm, nodes: list[NodeSpec], ray_node: str, *,
                 interval_wall: float, executor: str = "actor", container_actor=None,
                 batch_window: float | None = None, keep_samples: bool = True, events=(),
                 secret: bytes = b""):
        # ``rm``: the RM's handle, or its actor name (a restartable actor holding a handle
        # among its constructor arguments makes Ray warn that a restart may fail).
        if isinstance(rm, str):
            rm = ray.get_actor(rm, namespace=NAMESPACE)
        self.host_id, self.ray_node = host_id, ray_node
        self.rm = RMClient(rm, host_id)
        self._events = sorted(events, key=lambda e: e[0])   # (trace time, join|leave, name, spec)
        self.interval = interval_wall
        # NMs due within the window are sent together (a little early): at most ~10 calls
        # per interval per host for regular heartbeats; completions go out at once (OOB).
        self.window = max(interval_wall / 10, MIN_BATCH_WINDOW) if batch_window is None else batch_window
        self.nms = {s.name: NodeManagerState(s) for s in nodes}
        self.slots = HeartbeatSlots.deal(list(self.nms), time.time(), self.interval, self.window, self.nms)
        # NMs whose container ended (a call at once); with statuses or refusals to report;
        # stopped (left out of the marks); and the NMs started since construction (``born``)
        self._oob, self._news, self._dead, self._started = set(), set(), set(), 0
        self.gap = min(MIN_CALL_GAP, interval_wall / 2)
        self._last_call = 0.0
        self._wake: asyncio.Event | None = None
        self._loop_task: asyncio.Task | None = None
        self._stopped = False
        self._stop_event: asyncio.Event | None = None
        self.keep_samples = keep_samples
        self.stats = {"sent": 0, "answered": 0, "batches": 0, "oob": 0, "backlog_max": 0,
                      "backlog_sum": 0, "resync": 0, "launched": 0, "refused_launch": 0,
                      "restarted_nms": 0, "killed": 0}
        self.containers = HostContainers(Launcher(executor, ray_node, container_actor), secret, self.stats,
                                         self._noted)
        self.rtt: list[float] = []
        self.error = ""
        self.lag: list[float] = []
        quiet_gc()

    # ----- registration and the heartbeat loop ---------------------------------

    async def register(self) -> dict[str, str]:
        """Register every NM with the RM and start heartbeating; returns NM -> Ray node."""
        if self._wake is None:
            self._wake = asyncio.Event()
        await self._register([nm for nm in self.nms.values() if nm.alive])
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        return {name: self.ray_node for name, nm in self.nms.items() if nm.alive}

    async def _register(self, nms: list[NodeManagerState]) -> None:
        """RegisterNodeManager for ``nms``; an NM the RM refuses stops."""
        regs = [nm.registration(self.ray_node) for nm in nms]
        actions = await self.rm.register_nodes(regs)
        for nm, reg, action in zip(nms, regs, actions):
            told = {s.container for s in reg.running}
            nm.new = [s for s in nm.new if s.container not in told]
            if action != NORMAL:
                self._stopped_nm(nm)
            elif self.nms.get(nm.spec.name) is nm:
                self._dead.discard(nm.spec.name)
                if nm.has_news():
                    self._news.add(nm.spec.name)

    def _stopped_nm(self, nm: NodeManagerState) -> None:
        """``nm`` stops (crashed, refused, fenced): it leaves the host's marks."""
        nm.alive = False
        if self.nms.get(nm.spec.name) is nm:
            self._dead.add(nm.spec.name)

    async def _heartbeat_loop(self) -> None:
        try:
            await self._heartbeats()
        except Exception as e:  # noqa: BLE001 - surfaced through measurements() and the log
            import traceback  # noqa: PLC0415
            self.error = f"{type(e).__name__}: {e}"
            traceback.print_exc()
            if self._stop_event is not None:
                self._stop_event.set()
            raise

    def _noted(self, name: str, ended: bool) -> None:
        """NM ``name`` has news for the RM; a container of it ``ended``: it beats at once."""
        self._news.add(name)
        if ended:
            self._oob.add(name)
            if self._wake is not None:
                self._wake.set()

    async def _heartbeats(self) -> None:
        while not self._stopped:
            slots = self.slots                             # resume() may deal them again
            now = time.time()
            due = slots.next_due()
            wait = 0.0 if self._oob else (due - now) if due is not None else self.interval
            wait = max(wait, self._last_call + self.gap - now)
            if wait > 0:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
                except asyncio.TimeoutError:
                    pass
                if self._stopped:
                    return
                if time.time() < self._last_call + self.gap:
                    continue                               # woken early: the gap still holds
            now = time.time()
            # a call with news takes the slots due within the call gap, a quiet one an interval's
            ahead = max(self.window, self.gap) if self._news or self._oob else self.interval
            due_slots = slots.take(now + ahead)
            n_oob, self._oob = len(self._oob), set()
            n_due = slots.beats(due_slots)
            backlog = slots.beats(sid for sid, t in due_slots.items() if now - t > self.interval)
            self.stats["backlog_max"] = max(self.stats["backlog_max"], backlog)
            self.stats["backlog_sum"] += backlog
            if self._news or (due_slots and len(self._dead) < len(self.nms)):
                self._last_call = now
                await self._beat(n_due, n_oob, due_slots)
            slots.reschedule(due_slots, time.time())

    async def _beat(self, n_due: int, n_oob: int, slots: dict[int, float]) -> None:
        """One node_heartbeat call: NMs with something to report as NodeHeartbeats, the rest
        in one ``HostMark`` (answered only when the RM has something for them).  ``n_due``:
        NM beats of the ``slots`` due (slot -> due time, one lag sample each); ``n_oob``: NMs
        whose container ended."""
        beats, sent_by = [], {}
        nms = self.nms
        for name in sorted(self._news):
            nm = nms.get(name)
            if nm is None or not nm.alive or not nm.has_news():
                continue
            statuses = [s for s in nm.new if s.container not in nm.unacked] + list(nm.unacked.values())
            beats.append(NodeHeartbeat(name, tuple(statuses), tuple(nm.refused)))
            nm.refused = []
            sent_by[name] = nm
        self._news = set()
        born = self._started
        mark = HostMark(tuple(sorted(self._dead)), max(0, n_due - len(beats)), min(slots.values(), default=0.0))
        sent = time.time()
        self.stats["sent"] += n_due + n_oob
        self.stats["batches"] += 1
        self.stats["oob"] += n_oob
        responses = await self.rm.node_heartbeat(beats, (), mark)
        got = time.time()
        self.stats["answered"] += n_due + n_oob
        if self.keep_samples:
            self.rtt.append(got - sent)
            self.lag.extend(got - t for t in slots.values())
        reported = {b.node: {s.container for s in b.statuses if s.state == RUNNING} for b in beats}
        resync = []
        for resp in responses:
            nm = sent_by.get(resp.node) or nms.get(resp.node)
            if nm is None or not nm.alive or nms.get(nm.spec.name) is not nm or \
                    (resp.node not in sent_by and nm.born > born):
                continue                                   # crashed or restarted meanwhile
            told = reported.get(resp.node, ())
            if told:
                nm.new = [s for s in nm.new if s.container not in told and s.container not in nm.unacked]
            for cid in resp.ack:
                nm.unacked.pop(cid, None)
            for cid in resp.cleanup:
                self.containers.kill(nm, cid)
            if resp.action == RESYNC:
                resync.append(nm)
            elif resp.action != NORMAL:
                self._stopped_nm(nm)
        for name, nm in sent_by.items():
            if nm.alive and nm.has_news():
                self._news.add(name)                       # statuses not yet acknowledged
        if resync:
            self.stats["resync"] += len(resync)
            await self._register(resync)

    # ----- cluster events: NMs joining and leaving at trace times ---------------

    async def start(self, clock: TraceClock) -> None:
        """t = 0 on ``clock``: the config's node joins and leaves happen on time."""
        if self._events:
            asyncio.get_running_loop().create_task(self._cluster_events(clock))

    async def _cluster_events(self, clock: TraceClock) -> None:
        for t, kind, name, spec in self._events:
            await asyncio.sleep(max(0.0, clock.wall(t) - time.time()))
            if self._stopped:
                return
            if kind == "join":
                await self._join(spec)
            elif await self.kill_nm(name):             # leave: the RM declares it lost now
                await self.rm.lose_node(name, "left the cluster", departed=True)

    async def _join(self, spec: NodeSpec) -> None:
        """An NM starts (joins, or restarts empty) and registers."""
        old = self.nms.get(spec.name)
        if old is not None and old.alive:
            return
        self._started += 1
        nm = NodeManagerState(spec, self._started)
        self.nms[spec.name] = nm
        due = time.time() + self.interval
        await self._register([nm])
        self.slots.add([spec.name], due, self.nms)
        if self._wake is not None:
            self._wake.set()

    async def resume(self, clock: TraceClock) -> dict[str, str]:
        """After Ray restarted this host: catch up on past cluster events, register, heartbeat.

        A restarted actor is constructed again from the replay's arguments, so its NMs
        are the initial ones; joins and leaves whose time has passed are applied first.
        """
        now = time.time()
        past = [e for e in self._events if clock.wall(e[0]) <= now]
        self._events = [e for e in self._events if clock.wall(e[0]) > now]
        for _, kind, name, spec in past:
            if kind == "join":
                self.nms[name] = NodeManagerState(spec)
            else:
                self.nms.pop(name, None)
                self._dead.discard(name)
        self.slots = HeartbeatSlots.deal(list(self.nms), now, self.interval, self.window, self.nms)
        placed = await self.register()
        await self.start(clock)
        return placed

    # ----- containers ----------------------------------------------------------

    async def start_containers(self, launches: list[ContainerLaunch]) -> list[str]:
        """YARN startContainers: launch each granted container on its NM; "ok" or why not
        (``HostContainers.start``)."""
        return self.containers.start(self.nms, launches)

    # ----- warm-up, stop, stats ----------------------------------------------------

    async def prewarm(self, count: int, timeout: float = 120.0) -> int:
        """Before t = 0: make the first containers as fast as the rest (``HostContainers.prewarm``)."""
        return await self.containers.prewarm(ray.get_runtime_context().current_actor, count, timeout)

    async def arrive(self) -> None:
        """A warm task checks in and waits until all of them have."""
        await self.containers.arrive()

    async def lifeline(self) -> str:
        """Returns when the host stops ('') or its heartbeat loop fails (the error); the
        driver holds this call open to learn at once that the actor died (it then fails)."""
        if self._stop_event is None:
            self._stop_event = asyncio.Event()
        if not self._stopped and not self.error:
            await self._stop_event.wait()
        return self.error

    async def stop(self) -> dict:
        """Stop heartbeating; returns the host's measurements."""
        self._stopped = True
        if self._stop_event is not None:
            self._stop_event.set()
        if self._wake is not None:
            self._wake.set()
        if self._loop_task is not None:
            try:
                await asyncio.wait_for(self._loop_task, timeout=5.0)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._loop_task.cancel()
        return await self.measurements()

    async def health(self) -> str:
        """'' while the heartbeat loop is fine, else the error that stopped it."""
        return self.error

    async def reset_measurements(self) -> None:
        """Start measuring afresh (benchmarks skip their warm-up this way)."""
        for k in self.stats:
            self.stats[k] = 0
        self.rtt, self.lag = [], []

    async def measurements(self) -> dict:
        return {"host": self.host_id, "ray_node": self.ray_node, "nms": len(self.nms), "error": self.error,
                **self.stats, "link_lost": dict(self.rm.link.lost), "rtt": list(self.rtt), "lag": list(self.lag)}

    async def link_fault(self, fault) -> None:
        """A partition, slow or lossy link to the RM from now on (``fault_rules.LinkFault``);
        the containers run on whatever the link does."""
        self.rm.link.add(fault)

    async def kill_nm(self, node: str, restart_after: float | None = None) -> bool:
        """Crash one logical NM: it stops heartbeating and its containers are killed; with
        ``restart_after`` (wall seconds) it starts again, empty, that much later and
        registers (YARN: an NM restarted without recovery)."""
        nm = self.nms.get(node)
        if nm is None or not nm.alive:
            return False
        self._stopped_nm(nm)
        for cid in list(nm.containers):
            self.containers.kill(nm, cid)
        if restart_after is not None:
            asyncio.get_running_loop().create_task(self._restart_nm(nm.spec, restart_after))
        return True

    async def _restart_nm(self, spec: NodeSpec, delay: float) -> None:
        await asyncio.sleep(delay)
        if not self._stopped:
            self.stats["restarted_nms"] += 1
            await self._join(spec)
