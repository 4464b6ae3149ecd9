"""The ResourceManager Ray actor: ``ResourceManagerState`` driven by the wall clock.

One async actor per replay, named ``rayrm-rm`` in the ``rayrm`` namespace so tools
can find it (``ray.get_actor("rayrm-rm", namespace="rayrm")``).  Calls
(rm/protocol.py has the messages; every call carries ``caller`` and
``request_id`` and is answered idempotently):

    register_nodes(caller, request_id, [NodeRegistration])          -> [action]
    node_heartbeat(caller, request_id, [NodeHeartbeat])             -> [NodeHeartbeatResponse]
    register_apps(caller, request_id, [AppRegistration])            -> [AppRegistered]
    allocate(caller, request_id, [AllocateRequest], wait=seconds)   -> [AllocateResponse]
    finish_apps(caller, request_id, [(app, attempt)])               -> [action]

Node heartbeats are YARN's NODE_UPDATE: statuses are applied and the scheduler
runs.  ``allocate`` is the AM heartbeat; with ``wait > 0`` it is a long poll —
when nothing is waiting for the caller's apps it holds the answer until a
NODE_UPDATE queues something for them or ``wait`` passes, so a container freed on
one NM reaches the next task's AM without a heartbeat interval in between.

Each call runs the state machine synchronously (no await inside), so calls never
interleave inside the state.  A monitor loop declares silent NMs LOST
(``nm_expiry`` heartbeats, at least ``MIN_EXPIRY_WALL`` seconds) and updates the
Ray metrics:

    rayrm_containers_allocated_total    containers allocated
    rayrm_pending_asks                  tasks asked for and not yet placed
    rayrm_node_heartbeats_total         NM heartbeats handled
    rayrm_node_heartbeats_per_second    over the last second
    rayrm_running_containers            containers the NMs report running
    rayrm_allocation_to_running_seconds wall time from allocation to the payload starting
"""

from __future__ import annotations

import asyncio
import time

import ray

from rm.protocol import (AllocateRequest, AllocateResponse, AppRegistered, AppRegistration,
                         NodeHeartbeat, NodeHeartbeatResponse, NodeRegistration)
from rm.rm_state import ResourceManagerState

RM_NAME = "rayrm-rm"
#: an NM is declared lost after nm_expiry heartbeats, but never sooner than this (wall
#: seconds): at small time scales ten heartbeats are a fraction of a second, shorter
#: than a busy machine may take to schedule a process.
MIN_EXPIRY_WALL = 1.0
NAMESPACE = "rayrm"

LATENCY_BOUNDARIES = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0]


class _Metrics:
    """The RM's Ray metrics (ray.util.metrics), updated in batches."""

    def __init__(self, policy: str):
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
        self._allocations = self._heartbeats = self._latencies = 0

    def update(self, state: ResourceManagerState) -> None:
        if state.allocations > self._allocations:
            self.allocations.inc(state.allocations - self._allocations)
            self._allocations = state.allocations
        if state.heartbeats > self._heartbeats:
            self.heartbeats.inc(state.heartbeats - self._heartbeats)
            self._heartbeats = state.heartbeats
        for x in state.alloc_to_running[self._latencies:]:
            self.latency.observe(max(0.0, x))
        self._latencies = len(state.alloc_to_running)
        self.pending.set(state.pending_asks)


@ray.remote(num_cpus=0, max_concurrency=10_000)
class ResourceManager:
    """The central RM (see the module docstring for the calls)."""

    def __init__(self, *, dims, nodes, policy, policy_name: str, time_scale: float,
                 heartbeat_interval: float, nm_expiry: int, name: str = "", seed: int | None = None,
                 metrics: bool = True):
        self.state = ResourceManagerState(dims=dims, nodes=nodes, policy=policy, policy_name=policy_name,
                                          time_scale=time_scale, name=name, seed=seed)
        self.interval_wall = heartbeat_interval * time_scale
        self.expiry_wall = max(MIN_EXPIRY_WALL, nm_expiry * self.interval_wall)
        self._events: dict[str, asyncio.Event] = {}
        self._metrics = _Metrics(policy_name) if metrics else None
        self._monitor: asyncio.Task | None = None
        self._rate_window: list[tuple[float, int]] = []
        self.calls = 0

    # ----- the protocol --------------------------------------------------------

    async def register_nodes(self, caller: str, request_id: int, regs: list[NodeRegistration]) -> list[str]:
        return self._run(self.state.register_nodes, caller, request_id, regs)

    async def node_heartbeat(self, caller: str, request_id: int,
                             beats: list[NodeHeartbeat]) -> list[NodeHeartbeatResponse]:
        return self._run(self.state.node_heartbeat, caller, request_id, beats)

    async def register_apps(self, caller: str, request_id: int,
                            regs: list[AppRegistration]) -> list[AppRegistered]:
        return self._run(self.state.register_apps, caller, request_id, regs)

    async def allocate(self, caller: str, request_id: int, requests: list[AllocateRequest],
                       wait: float = 0.0) -> list[AllocateResponse]:
        out = self._run(self.state.allocate, caller, request_id, requests)
        if wait > 0 and not any(r.allocated or r.completed or r.action != "normal" for r in out):
            event = self._events.setdefault(caller, asyncio.Event())
            event.clear()
            try:
                await asyncio.wait_for(event.wait(), timeout=wait)
            except asyncio.TimeoutError:
                pass
            out = self._run(self.state.poll, caller, request_id, [r.app for r in out])
        return out

    async def finish_apps(self, caller: str, request_id: int, items: list[tuple[str, int]]) -> list[str]:
        return self._run(self.state.finish_apps, caller, request_id, items)

    def _run(self, method, caller, request_id, payload):
        self.calls += 1
        out = method(time.time(), caller, request_id, payload)
        self._wake()
        return out

    def _wake(self) -> None:
        """Wake the long polls of AM hosts that have something to collect."""
        for host in self.state.news:
            event = self._events.get(host)
            if event is not None:
                event.set()
        self.state.news.clear()

    # ----- the replay's clock and liveness -------------------------------------

    async def start_clock(self, start_wall: float) -> None:
        """t = 0 at ``start_wall``; from then on silent NMs expire."""
        self.state.start_clock(start_wall)
        if self._monitor is None:
            self._monitor = asyncio.get_running_loop().create_task(self._monitor_loop())

    async def _monitor_loop(self) -> None:
        period = min(max(self.interval_wall, 0.01), 1.0)
        last_beats, last_t = self.state.heartbeats, time.time()
        while True:
            await asyncio.sleep(period)
            now = time.time()
            if self.state.start_wall is not None and now > self.state.start_wall:
                if self.state.expire_nodes(now, self.expiry_wall):
                    self._wake()
            if now - last_t >= 1.0:
                rate = (self.state.heartbeats - last_beats) / (now - last_t)
                last_beats, last_t = self.state.heartbeats, now
                if self._metrics is not None:
                    self._metrics.rate.set(rate)
            if self._metrics is not None:
                self._metrics.update(self.state)
                self._metrics.running.set(self.state.running)

    async def lose_node(self, node: str, detail: str = "lost") -> list[int]:
        """Declare an NM LOST now (the NM host saw it die); returns its containers."""
        out = self.state.lose_node(time.time(), node, detail)
        self._wake()
        return out

    # ----- views -----------------------------------------------------------------

    async def progress(self) -> dict:
        return self.state.progress(time.time()) | {"calls": self.calls}

    async def export(self) -> dict:
        """The run log and the RM's measurements, for the driver to write out."""
        if self._metrics is not None:
            self._metrics.update(self.state)
        s = self.state
        return {"log": s.log, "alloc_to_running": list(s.alloc_to_running),
                "alloc_to_launch": list(s.alloc_to_launch), "progress": s.progress(time.time()),
                "calls": self.calls}

    async def stop(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            self._monitor = None
