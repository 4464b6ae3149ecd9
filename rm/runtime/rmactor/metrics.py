"""The RM's Ray metrics (ray.util.metrics), updated in batches by its monitor:

    rayrm_containers_allocated_total    containers allocated
    rayrm_pending_asks                  tasks asked for and not yet placed
    rayrm_node_heartbeats_total         NM heartbeats handled
    rayrm_node_heartbeats_per_second    over the last second
    rayrm_running_containers            containers the NMs report running
    rayrm_allocation_to_running_seconds wall time from allocation to the payload starting
"""

from __future__ import annotations

import time

from rayrm.rm.service.state import ResourceManagerState

LATENCY_BOUNDARIES = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0]


class RMMetrics:
    """The metrics of one RM (module docstring); a restarted RM starts counting where the
    state it recovered left off."""

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
        records = state.records
        self._allocations, self._heartbeats = records.allocations, records.heartbeats
        self._latencies = len(records.alloc_to_running)
        self._last_beats, self._last_rate = 0, 0.0       # the heartbeat rate's last reading

    def start(self, state: ResourceManagerState) -> None:
        """The monitor starts: the heartbeat rate is read from now on."""
        self._last_beats, self._last_rate = state.records.heartbeats, time.time()

    def tick(self, now: float, state: ResourceManagerState) -> None:
        """Once a wall second at most: the heartbeat rate since the last reading, and the rest."""
        if now - self._last_rate >= 1.0:
            beats = state.records.heartbeats
            self.rate.set((beats - self._last_beats) / (now - self._last_rate))
            self._last_beats, self._last_rate = beats, now
            self.update(state)
            self.running.set(state.running)

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
