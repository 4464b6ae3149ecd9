"""Calling the ResourceManager across its restarts (NM and AM hosts use this).

``RMClient`` is the hosts' typed side of the protocol (rm/service/protocol.py): one
method per call, each numbered with the caller's next ``request_id``.

A call to the RM actor fails with ``RayActorError`` (``ActorUnavailableError``
while Ray restarts it) when the RM dies.  The caller repeats it — with the same
``request_id``, so the recovered RM answers it as it did before if it had already
journaled it, and applies it once otherwise — backing off from 50 ms to at most
``MAX_DELAY`` so that callers find the restarted RM within a quarter second, for
up to ``BUDGET`` seconds before giving up.

Ray is imported when a call is made, not with this module: ``rm.service`` is the
Ray-free protocol state.
"""

from __future__ import annotations

import asyncio
import time

MAX_DELAY = 0.25
BUDGET = 60.0


async def call_with_retry(method, *args):
    """``await method.remote(*args)``, repeated while the actor is unreachable."""
    import ray  # noqa: PLC0415 - service must not import Ray at import time
    deadline, delay = time.time() + BUDGET, 0.05
    while True:
        try:
            return await method.remote(*args)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
            if time.time() > deadline:
                raise
            await asyncio.sleep(delay)
            delay = min(MAX_DELAY, delay * 2)


class RMClient:
    """One host's calls to the RM actor ``rm``, as ``caller``, with increasing request ids.

    Each call is retried with its own request id while the RM restarts, so the RM
    applies it at most once (see the module docstring).  ``calls`` counts them.
    """

    def __init__(self, rm, caller: str):
        self.rm, self.caller = rm, caller
        # ids start from the clock in microseconds: a host Ray restarted (same caller name)
        # never reuses an id the RM still holds the answer of
        self.request_id = int(time.time() * 1e6)
        self.calls = 0

    def _next(self) -> int:
        self.request_id += 1
        self.calls += 1
        return self.request_id

    async def register_nodes(self, regs: list) -> list[str]:
        return await call_with_retry(self.rm.register_nodes, self.caller, self._next(), regs)

    async def node_heartbeat(self, beats: list, idle: tuple = (), due: float = 0.0) -> list:
        return await call_with_retry(self.rm.node_heartbeat, self.caller, self._next(), beats, idle, due,
                                     time.time())

    async def register_apps(self, regs: list) -> list:
        return await call_with_retry(self.rm.register_apps, self.caller, self._next(), regs)

    async def allocate(self, requests: list, wait: float = 0.0, idle: tuple = ()) -> list:
        return await call_with_retry(self.rm.allocate, self.caller, self._next(), requests, wait, time.time(),
                                     idle)

    async def finish_apps(self, items: list[tuple[str, int]]) -> list[str]:
        return await call_with_retry(self.rm.finish_apps, self.caller, self._next(), items)

    async def lose_node(self, node: str, detail: str) -> list[int]:
        """Declare one of this host's NMs LOST now (idempotent by itself: no request id)."""
        return await call_with_retry(self.rm.lose_node, node, detail)
