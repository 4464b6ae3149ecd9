"""What the RM's monitor expires: YARN's NMLivelinessMonitor and AMLivelinessMonitor, and
containers allocated and never reported running.

NMs silent for longer than their expiry are LOST, AM attempts silent for longer than
theirs FAIL (``Liveness``, rm/service/liveness.py, says who is silent, counting a stalled
RM's own pause as nobody's silence), and once per NM expiry the containers delivered and
not reported running for ``ALLOCATION_EXPIRIES`` NM expiries are lost to their AMs.  This
room decides; the actor applies and journals each call it yields, in order.
"""

from __future__ import annotations

from typing import Iterator

from rayrm.rm.core.fault_rules import ALLOCATION_EXPIRIES
from rayrm.rm.service.calls import Call
from rayrm.rm.service.liveness import Liveness
from rayrm.rm.service.state import ResourceManagerState


class Expiries:
    """The expiries of one RM: ``expiry_wall`` for NMs, ``am_expiry_wall`` for AM attempts."""

    def __init__(self, liveness: Liveness, expiry_wall: float, am_expiry_wall: float):
        self.liveness = liveness
        self.expiry_wall, self.am_expiry_wall = expiry_wall, am_expiry_wall
        self._allocation_scan = 0.0          # when acquired containers were last looked at

    def due(self, state: ResourceManagerState, at: float) -> Iterator[tuple[Call, tuple]]:
        """The expiry calls due at ``at``, each decided once the one before it was applied."""
        silent = self.liveness.silent_nodes(state, at, self.expiry_wall)
        if silent:
            yield Call.EXPIRE_NODES, (self.expiry_wall, silent)
        silent = self.liveness.silent_apps(state, at, self.am_expiry_wall)
        if silent:
            yield Call.EXPIRE_APPS, (self.am_expiry_wall, silent)
        if at - self._allocation_scan >= self.expiry_wall:      # once per expiry: reads every container
            self._allocation_scan = at
            limit, since = ALLOCATION_EXPIRIES * self.expiry_wall, state.resync.since
            stale = [c.container for c in state.containers.acquired()
                     if self.liveness.heard(max(c.allocated, since), at) > limit]
            if stale:
                detail = f"not reported running for {ALLOCATION_EXPIRIES} NM expiries ({limit:.3f}s)"
                yield Call.EXPIRE_ALLOCATIONS, (stale, detail)
