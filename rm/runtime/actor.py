"""The ResourceManager Ray actor: ``ResourceManagerState`` driven by the wall clock.

One async actor per replay, named ``rayrm-rm`` in the ``rayrm`` namespace so tools
can find it (``ray.get_actor("rayrm-rm", namespace="rayrm")``).  Calls
(rm/service/protocol.py has the messages; every call carries ``caller`` and
``request_id`` and is answered idempotently):

    register_nodes(caller, request_id, [NodeRegistration])          -> [action]
    node_heartbeat(caller, request_id, [NodeHeartbeat], idle, sent, HostMark) -> [NodeHeartbeatResponse]
    register_apps(caller, request_id, [AppRegistration])            -> [AppRegistered]
    allocate(caller, request_id, [AllocateRequest], sent, AppMark) -> [AllocateResponse]
    finish_apps(caller, request_id, [(app, attempt)])               -> [action]
    lose_host(caller, request_id, host, detail)                     -> [node]   (the driver)
    fault(caller, request_id, spec, node, app)                      -> None     (the driver)

The NM and AM hosts make their calls on the RM's channel (``rm/service/channel.py``: one
TCP stream per host, its address and key from ``channel()``); the driver's are Ray calls.

Node heartbeats are YARN's NODE_UPDATE: statuses are applied and the scheduler
runs.  ``allocate`` is the AM heartbeat; with ``AppMark.wait > 0`` it is a long poll —
when nothing is waiting for the caller's apps it holds the answer until a
NODE_UPDATE queues something for them or ``wait`` passes, so a container freed on
one NM reaches the next task's AM without a heartbeat interval in between
(``LongPolls``, rm/runtime/polls.py).

Each call runs the state machine synchronously (no await inside), so calls never
interleave inside the state, and is journaled (``rm/service/store.py``) before its
answer leaves: the actor runs with ``max_restarts``, and a restarted actor finds
the snapshot and journal in ``state_dir``, rebuilds the state, and tells every NM
and AM to RESYNC (``ResourceManagerState.recovered``).

The monitor — one tick per heartbeat interval, run on a call the RM wakes for anyway
when one comes near it, else on its own timer (``Ticker``, rm/runtime/ticker.py) — is
the RM's NMLivelinessMonitor and AMLivelinessMonitor: NMs
silent for ``nm_expiry`` heartbeats are LOST, AM attempts silent for
``am_expiry`` heartbeats FAIL (both at least ``MIN_EXPIRY_WALL`` seconds), and it
is the AMLauncher: each attempt the RM started is launched by calling
``launch_attempts`` on its AM host (the actor named ``rayrm-<host>``).  It also
updates the Ray metrics:

    rayrm_containers_allocated_total    containers allocated
    rayrm_pending_asks                  tasks asked for and not yet placed
    rayrm_node_heartbeats_total         NM heartbeats handled
    rayrm_node_heartbeats_per_second    over the last second
    rayrm_running_containers            containers the NMs report running
    rayrm_allocation_to_running_seconds wall time from allocation to the payload starting
"""

from __future__ import annotations

import asyncio
import functools
import os
import pickle
import resource
import time

import ray

from rayrm.rm.core.config import MIN_EXPIRY_WALL
from rayrm.rm.core.fault_rules import ALLOCATION_EXPIRIES, expiry
from rayrm.rm.core.policies import PolicyError
from rayrm.rm.service.protocol import (NAMESPACE, AllocateRequest, AllocateResponse, AppMark, AppRegistered,
                                      AppRegistration, Call, HostMark, NodeHeartbeat, NodeHeartbeatResponse,
                                      NodeRegistration)
from rayrm.rm.service.channel import ChannelServer
from rayrm.rm.service.store import SNAPSHOT_SECONDS, StateStore, replay_records
from rayrm.rm.service.client import call_host
from rayrm.rm.runtime.pace import PaceMeter
from rayrm.rm.runtime.polls import LongPolls
from rayrm.rm.runtime.ticker import Ticker
from rayrm.rm.service.heap import quiet_gc
from rayrm.rm.service.liveness import HOST_FACTOR, Liveness
from rayrm.rm.service.state import ResourceManagerState
from rayrm.rm.ui.snapshot import rm_snapshot

#: Ray restarts of the RM actor (each recovers from the snapshot and journal).
RM_MAX_RESTARTS = 5
#: after a restart, NMs and AMs have this many wall seconds more than their expiry to
#: RESYNC: a call that was out when the RM died fails only about a second after the
#: restart, and the caller retries then.
RESYNC_GRACE_WALL = 3.0

LATENCY_BOUNDARIES = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0]


class _Metrics:
    """The RM's Ray metrics (ray.util.metrics), updated in batches."""

    def __init__(self, policy: str, state: ResourceManagerState):
        from ray.util.metrics import Counter, Gauge, Histogram  # noqa: PLC0415
        tags = {"policy": policy}
        keys = ("policy",)
        self.allocations = Counter("rayrm_containers_allocated", "Containers allocated by the RM",
                                   tag_keys=keys).set_default_tags(tags)
        self.heartbeats = Counter("rayrm_node_heartbeats", "NodeManager heartbeats handled.",
                                  tag_keys=keys).set_default_tags(tags)
        self.pending = Gauge("rayrm_pending_asks", "Tasks asked for and not yet placed.",
                             tag_keys=keys).set_default_tags(tags)
        self.rate = Gauge("rayrm_node_heartbeats_per_second", "NM heartbeats handled in the last second.",
                          tag_keys=keys).set_default_tags(tags)
        self.running = Gauge("rayrm_running_containers", "Containers running on the NMs.",
                             tag_keys=keys).set_default_tags(tags)
        self.latency = Histogram("rayrm_allocation_to_running_seconds",
                                 "Wall seconds from allocation to the container's payload starting.",
                                 boundaries=LATENCY_BOUNDARIES, tag_keys=keys).set_default_tags(tags)
        # A restarted RM starts counting where the state it recovered left off.
        records = state.records
        self._allocations, self._heartbeats = records.allocations, records.heartbeats
        self._latencies = len(records.alloc_to_running)

    def update(self, state: ResourceManagerState) -> None:
        records = state.records
        if records.allocations > self._allocations:
            self.allocations.inc(records.allocations - self._allocations)
            self._allocations = records.allocations
        if records.heartbeats > self._heartbeats:
            self.heartbeats.inc(records.heartbeats - self._heartbeats)
            self._heartbeats = records.heartbeats
        for x in records.alloc_to_running[self._latencies:]:
            self.latency.observe(max(0.0, x))
        self._latencies = len(records.alloc_to_running)
        self.pending.set(state.pending_asks)


def _halts(method):
    """A protocol call that, once the policy has failed (``PolicyError``), changes nothing
    more: it waits unanswered until the driver, which sees ``policy_error`` in the next
    ``progress()``, ends the replay and kills the hosts; the state is not scheduled half-broken."""
    @functools.wraps(method)
    async def call(self, *args, **kwargs):
        if self.policy_error is None:
            try:
                return await method(self, *args, **kwargs)
            except PolicyError as e:
                self.policy_error = self.policy_error or str(e)
        await asyncio.Event().wait()
    return call


class _Pickled:
    """A view's answer, pickled on the RM's event loop; it unpickles as the object itself.

    Ray serialises an actor's answer in its main thread while the event loop goes on
    running the hosts' channel calls (rm/service/channel.py), which change the state the
    answer may share (the run log, the records); pickled here, the answer is the state as
    of the call."""

    __slots__ = ("data",)

    def __init__(self, answer):
        self.data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)

    def __reduce__(self):
        return pickle.loads, (self.data,)


@ray.remote(num_cpus=0, max_concurrency=10_000)
class ResourceManager:
    """The central RM (see the module docstring for the calls)."""

    def __init__(self, *, dims, nodes, policy, policy_name: str, time_scale: float,
                 heartbeat_interval: float, nm_expiry: int, am_expiry: int = 10, max_attempts: int = 2,
                 state_dir: str | None = None, secret: bytes = b"", name: str = "",
                 seed: int | None = None, metrics: bool = True, host_silence: float = HOST_FACTOR,
                 keep_state: bool = False, queues=None):
        self.interval_wall = heartbeat_interval * time_scale
        self.expiry_wall = expiry(nm_expiry, self.interval_wall, MIN_EXPIRY_WALL)
        self.am_expiry_wall = expiry(am_expiry, self.interval_wall, MIN_EXPIRY_WALL)
        self.store = StateStore(state_dir, keep=keep_state) if state_dir else None
        self.polls = LongPolls()                         # the AM hosts' long polls held
        self._ticker: Ticker | None = None               # the monitor (``_tick``)
        self._scan_every = self._last_scan = 0.0         # liveness scans: how often, and the last
        self._last_beats, self._last_rate = 0, 0.0       # the heartbeat rate's last reading
        self._launching: set[tuple[str, int]] = set()
        self._am_hosts: dict = {}                        # AM host id -> its actor handle
        self._last_snapshot = time.time()
        self.calls = 0
        self._channel = ChannelServer(self, os.urandom(32))  # the hosts' calls (rm/service/channel.py)
        self.policy_error: str | None = None           # set when the policy failed: the RM halts
        self.ui_memo: dict = {}                        # what ui_snapshot has sent (rm_snapshot)
        self.liveness = Liveness(host_silence)
        self._allocation_scan = 0.0                      # when acquired containers were last looked at
        self.pace = PaceMeter(self.interval_wall)
        self.snapshots: list[tuple[int, float]] = []     # (bytes, seconds) of each snapshot written
        self.snapshot_blocked: list[float] = []          # seconds the loop spent starting each
        if self.store is not None and self.store.exists():
            t0 = time.time()
            self.state, records = self.store.load()
            loaded = time.time()
            replay_records(self.state, records)
            self.state.apps.news.clear()
            stats = {"snapshot_bytes": self.store.snapshot_path.stat().st_size,
                     "journal_bytes": self.store.journal_bytes(), "journal_records": len(records),
                     "load_s": round(loaded - t0, 4), "replay_s": round(time.time() - loaded, 4),
                     "restore_s": round(time.time() - t0, 4)}
            args = (f"snapshot {self.store.generation} + {len(records)} journal records replayed in "
                    f"{time.time() - t0:.3f}s", RESYNC_GRACE_WALL, stats)
            now = self._now()
            self.state.recovered(now, *args)
            self._journal(Call.RECOVERED, now, args)
            self._start_monitor()
        else:
            self.state = ResourceManagerState(dims=dims, nodes=nodes, policy=policy, policy_name=policy_name,
                                              time_scale=time_scale, name=name, seed=seed,
                                              max_attempts=max_attempts, secret=secret, queues=queues)
            if self.store is not None:
                self.store.snapshot(self.state)
        self._metrics = _Metrics(policy_name, self.state) if metrics else None
        quiet_gc()

    # ----- the protocol --------------------------------------------------------

    # Each call: the wall time now, the state's typed method, then the journal record of
    # the same call and arguments (``Call``; ``ResourceManagerState.apply`` replays it).  A
    # host's call takes exactly the state method's arguments, so the journal can keep the
    # bytes they arrived as (``_journal``).

    @_halts
    async def register_nodes(self, caller: str, request_id: int, regs: list[NodeRegistration]) -> list[str]:
        now = self._now()
        out = self.state.register_nodes(now, caller, request_id, regs)
        self._journal(Call.REGISTER_NODES, now, (caller, request_id, regs))
        return out

    @_halts
    async def node_heartbeat(self, caller: str, request_id: int, beats: list[NodeHeartbeat],
                             idle: tuple[str, ...] = (), sent: float = 0.0,
                             mark: HostMark | None = None) -> list[NodeHeartbeatResponse]:
        now = self._now()
        if mark is not None and mark.due:
            self.pace.heartbeat_due(now, mark.due)
        out = self.state.node_heartbeat(now, caller, request_id, beats, idle, sent, mark)
        self._journal(Call.NODE_HEARTBEAT, now, (caller, request_id, beats, idle, sent, mark))
        self._nudge()
        return out

    @_halts
    async def register_apps(self, caller: str, request_id: int,
                            regs: list[AppRegistration]) -> list[AppRegistered]:
        now = self._now()
        out = self.state.register_apps(now, caller, request_id, regs)
        self._journal(Call.REGISTER_APPS, now, (caller, request_id, regs))
        return out

    @_halts
    async def allocate(self, caller: str, request_id: int, requests: list[AllocateRequest],
                       sent: float = 0.0, mark: AppMark | None = None) -> list[AllocateResponse]:
        now = self._now()
        out = self.state.allocate(now, caller, request_id, requests, sent, mark)
        self._journal(Call.ALLOCATE, now, (caller, request_id, requests, sent, mark))
        wait = mark.wait if mark is not None else 0.0
        if wait > 0 and not any(r.allocated or r.completed or r.action != "normal" for r in out):
            await self.polls.hold(caller, now, wait, self._ticker)
            now = self._now()
            out = self.state.poll(now, caller, request_id, requests, mark)
            if any(r.allocated or r.completed for r in out):    # a poll that delivers nothing changes nothing
                self._journal(Call.POLL, now, (caller, request_id, requests, mark))
        self._nudge()
        return out

    def _nudge(self) -> None:
        """A call is done: the monitor's tick runs now if it is due (``Ticker.nudge``)."""
        if self._ticker is not None:
            self._ticker.nudge()

    @_halts
    async def finish_apps(self, caller: str, request_id: int, items: list[tuple[str, int]]) -> list[str]:
        now = self._now()
        out = self.state.finish_apps(now, caller, request_id, items)
        self._journal(Call.FINISH_APPS, now, (caller, request_id, items))
        return out

    @_halts
    async def lose_host(self, caller: str, request_id: int, host: str, detail: str) -> list[str]:
        """Every NM of NM host ``host`` is LOST now (its actor died)."""
        now = self._now()
        out = self.state.lose_host(now, caller, request_id, host, detail)
        self._journal(Call.LOSE_HOST, now, (caller, request_id, host, detail))
        return out

    @_halts
    async def lose_am_host(self, caller: str, request_id: int, host: str, detail: str,
                           ray_node: str = "") -> list[str]:
        """Every current attempt AM host ``host`` ran fails (its actor died); new ones launch;
        ``ray_node``: its Ray node, gone (no AM registers from there again)."""
        now = self._now()
        out = self.state.lose_am_host(now, caller, request_id, host, detail, ray_node)
        self._journal(Call.LOSE_AM_HOST, now, (caller, request_id, host, detail, ray_node))
        return out

    @_halts
    async def lose_node(self, node: str, detail: str = "lost", departed: bool = False) -> list[int]:
        """Declare an NM LOST now (its host stopped it; ``departed``: for good); returns its
        containers."""
        now = self._now()
        out = self.state.lose_node(now, node, detail, departed)
        self._journal(Call.LOSE_NODE, now, (node, detail, departed))
        return out

    async def channel(self) -> tuple[str, int, bytes]:
        """Where the hosts' channel to this RM listens, and its key: (address, port, key)."""
        host, port = await self._channel.start(ray.util.get_node_ip_address())
        return host, port, self._channel.key

    @_halts
    async def fault(self, caller: str, request_id: int, spec: str, node: str = "", app: str = "") -> None:
        """Log a fault about to be injected (events.csv ``fault``)."""
        now = self._now()
        self.state.fault(now, caller, request_id, spec, node, app)
        self._journal(Call.FAULT, now, (caller, request_id, spec, node, app))

    def _now(self) -> float:
        """The wall time of the call about to run (counted); once the policy has failed, no
        call runs."""
        if self.policy_error is not None:
            raise PolicyError("the ResourceManager", "halted", self.policy_error)
        self.calls += 1
        return time.time()

    def _journal(self, call: Call, now: float, args: tuple) -> None:
        """The call just applied at ``now``: journal it before its answer leaves, snapshot
        when due, and wake the long polls it gave news.  A host's call that came over the
        channel is journaled as the bytes its arguments arrived as (``ChannelServer.wire``:
        the same arguments, not pickled a second time)."""
        if self.store is not None:
            self.store.append(call, now, args, self._channel.wire(call))
            if self.store.due():
                self._snapshot()
        self._wake()

    def _snapshot(self) -> None:
        """A snapshot off the loop (a forked child writes it); the loop pays for the fork."""
        t0 = time.time()
        self.store.snapshot(self.state, background=True)
        self._last_snapshot = time.time()
        self.snapshot_blocked.append(self._last_snapshot - t0)

    def _wake(self) -> None:
        """Wake the long polls of AM hosts that have something to collect."""
        news = self.state.apps.news
        self.polls.wake(news)
        news.clear()

    # ----- the replay's clock, liveness and the AM launcher -----------------------

    async def start_clock(self, start_wall: float) -> None:
        """t = 0 at ``start_wall``; from then on silent NMs and AMs expire."""
        now = self._now()
        self.state.start_clock(now, start_wall)
        self._journal(Call.START_CLOCK, now, (start_wall,))
        self._start_monitor()

    def _start_monitor(self) -> None:
        if self._ticker is None and self.state.start_wall is not None:
            period = min(max(self.interval_wall, 0.01), 1.0)
            # liveness and launches are looked at ten times per expiry, not every tick: a scan
            # reads every NM and app record
            self._scan_every = max(period, min(self.expiry_wall, self.am_expiry_wall) / 10)
            self._last_beats, self._last_rate = self.state.records.heartbeats, time.time()
            self._ticker = Ticker(period, period / 2, self._tick)

    def _tick(self, now: float, planned: float) -> None:
        """The monitor (``Ticker``: once per heartbeat interval, on a wake-up the RM has
        anyway): the loop's lateness and the pace, liveness and launches every
        ``_scan_every``, the long polls whose wait is up, the snapshot, the metrics.  A
        policy failure (expiring a node rekeys every app) ends it."""
        try:
            self._monitor_tick(now, planned)
        except PolicyError as e:
            self.policy_error = self.policy_error or str(e)
            self._ticker.stop()
            self._ticker = None

    def _monitor_tick(self, now: float, planned: float) -> None:
        late = self.liveness.tick(now, planned)
        self.pace.tick(now, late)
        s = self.state
        self.polls.end(now + self._ticker.slack)
        if now > s.start_wall and now - self._last_scan >= self._scan_every:
            self._last_scan = now
            self._expire(now)
            # one call per AM host, whatever the number of its apps: a restarted host
            # of 1,500 AMs is launched in one call, not 1,500
            launches: dict[str, list[tuple[str, int]]] = {}
            for host, app, attempt in s.pending_launches():
                if (app, attempt) not in self._launching:
                    launches.setdefault(host, []).append((app, attempt))
            for host, app in s.failed_apps():
                if (app, 0) not in self._launching:
                    launches.setdefault(host, []).append((app, 0))
            for host, items in launches.items():
                self._launching.update(items)
                asyncio.get_running_loop().create_task(self._launch(host, items))
        if self.store is not None:
            written = self.store.poll()
            if written is not None:
                self.snapshots.append(written)
            if self.store.records and now - self._last_snapshot > SNAPSHOT_SECONDS:
                self._snapshot()
        if now - self._last_rate >= 1.0:
            rate = (s.records.heartbeats - self._last_beats) / (now - self._last_rate)
            self._last_beats, self._last_rate = s.records.heartbeats, now
            if self._metrics is not None:
                self._metrics.rate.set(rate)
                self._metrics.update(s)
                self._metrics.running.set(s.running)

    def _expire(self, at: float) -> None:
        """NMs and AM attempts silent at ``at`` for longer than their expiry (``Liveness``)
        are lost."""
        silent = self.liveness.silent_nodes(self.state, at, self.expiry_wall)
        if silent:
            now = self._now()
            self.state.expire_nodes(now, self.expiry_wall, silent)
            self._journal(Call.EXPIRE_NODES, now, (self.expiry_wall, silent))
        silent = self.liveness.silent_apps(self.state, at, self.am_expiry_wall)
        if silent:
            now = self._now()
            self.state.expire_apps(now, self.am_expiry_wall, silent)
            self._journal(Call.EXPIRE_APPS, now, (self.am_expiry_wall, silent))
        if at - self._allocation_scan >= self.expiry_wall:       # once per expiry: reads every container
            self._allocation_scan = at
            limit, since = ALLOCATION_EXPIRIES * self.expiry_wall, self.state.resync.since
            stale = [c.container for c in self.state.containers.acquired()
                     if self.liveness.heard(max(c.allocated, since), at) > limit]
            if stale:
                now = self._now()
                detail = f"not reported running for {ALLOCATION_EXPIRIES} NM expiries ({limit:.3f}s)"
                self.state.expire_allocations(now, stale, detail)
                self._journal(Call.EXPIRE_ALLOCATIONS, now, (stale, detail))

    async def stall(self, seconds: float) -> None:
        """The ``stall-rm`` fault: block the RM's loop for ``seconds`` (a long GC pause, a slow disk)."""
        time.sleep(seconds)

    async def _launch(self, host: str, items: list[tuple[str, int]]) -> None:
        """AMLauncher: ask AM host ``host`` to start each (app, attempt), or (attempt 0) to
        end the app the RM failed, in one call each; again at a later tick if it fails.
        The host's handle is looked up once (``ray.get_actor`` blocks the loop)."""
        try:
            handle = self._am_hosts.get(host)
            if handle is None:
                handle = self._am_hosts[host] = ray.get_actor(f"rayrm-{host}", namespace=NAMESPACE)
            starts = [(app, attempt) for app, attempt in items if attempt]
            ends = [app for app, attempt in items if not attempt]
            # bounded: a host that does not take them within an AM expiry gets them at a later tick
            if starts:
                await call_host(handle.launch_attempts, starts, timeout=self.am_expiry_wall, budget=self.am_expiry_wall)
            if ends:
                await call_host(handle.end_apps, ends, timeout=self.am_expiry_wall, budget=self.am_expiry_wall)
        except Exception:  # noqa: BLE001 - the host is unreachable now; the next tick retries
            self._am_hosts.pop(host, None)
            await asyncio.sleep(self.am_expiry_wall / 4)
            self._launching.difference_update(items)

    # ----- views -----------------------------------------------------------------

    # Each view's answer is ``_Pickled`` on the loop: the state goes on changing meanwhile.

    async def progress(self) -> dict:
        lag, behind = self.pace.current()
        return _Pickled(self.state.progress(time.time()) | {"calls": self.calls, "lag": round(lag, 3),
                                                            "behind": behind, "policy_error": self.policy_error})

    async def ui_snapshot(self) -> dict:
        """The compact view the driver's web UI polls, at most once per heartbeat interval
        (``rayrm.rm.ui.snapshot``); ended apps cross once."""
        self.state.nodes.settle()
        return _Pickled(rm_snapshot(self.state, time.time(), self.ui_memo, self.pace))

    async def export(self) -> dict:
        """The run log and the RM's measurements, for the driver to write out."""
        if self._metrics is not None:
            self._metrics.update(self.state)
        s = self.state
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return _Pickled({
            "log": s.log, "alloc_to_running": list(s.records.alloc_to_running),
            "alloc_to_launch": list(s.records.alloc_to_launch), "progress": s.progress(time.time()),
            "calls": self.calls, "pace": self.pace.export(),
            "cpu_seconds": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024,
            "snapshots": list(self.snapshots), "snapshot_blocked": list(self.snapshot_blocked),
            "recoveries": list(s.recoveries), "policy_error": self.policy_error,
            "journal_bytes": self.store.journal_bytes() if self.store is not None else 0,
            "journal_written": self.store.written if self.store is not None else 0})

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self.polls.end(float("inf"))
        if self.store is not None:
            self.store.close()
            self.store = None            # a long poll still out must not journal into a closed file
