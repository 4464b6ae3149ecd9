"""The RM's AMLauncher: each attempt the RM started is launched by calling
``launch_attempts`` on its AM host (the actor named ``rayrm-<host>``), and each app the RM
failed is ended there (``end_apps``).

One call per AM host, whatever the number of its apps: a restarted host of 1,500 AMs is
launched in one call, not 1,500.  A call is bounded by an AM expiry; a host that does
not take it gets it again at a later scan.
"""

from __future__ import annotations

import asyncio

import ray

from rayrm.rm.service.client import call_host
from rayrm.rm.service.protocol import NAMESPACE
from rayrm.rm.service.state import ResourceManagerState


class AMLauncher:
    """Launches and ends attempts on their AM hosts, each call bounded by ``am_expiry_wall``."""

    def __init__(self, am_expiry_wall: float):
        self.am_expiry_wall = am_expiry_wall
        self._launching: set[tuple[str, int]] = set()    # (app, attempt; 0: end the app) out
        self._hosts: dict = {}                           # AM host id -> its actor handle

    def launch_due(self, state: ResourceManagerState) -> None:
        """Start a call per AM host for the attempts to launch and apps to end not yet out."""
        launches: dict[str, list[tuple[str, int]]] = {}
        for host, app, attempt in state.pending_launches():
            if (app, attempt) not in self._launching:
                launches.setdefault(host, []).append((app, attempt))
        for host, app in state.failed_apps():
            if (app, 0) not in self._launching:
                launches.setdefault(host, []).append((app, 0))
        for host, items in launches.items():
            self._launching.update(items)
            asyncio.get_running_loop().create_task(self._launch(host, items))

    async def _launch(self, host: str, items: list[tuple[str, int]]) -> None:
        """Ask AM host ``host`` to start each (app, attempt), or (attempt 0) to end the app
        the RM failed, in one call each; again at a later scan if it fails.  The host's
        handle is looked up once (``ray.get_actor`` blocks the loop)."""
        bound = self.am_expiry_wall
        try:
            handle = self._hosts.get(host)
            if handle is None:
                handle = self._hosts[host] = ray.get_actor(f"rayrm-{host}", namespace=NAMESPACE)
            starts = [(app, attempt) for app, attempt in items if attempt]
            ends = [app for app, attempt in items if not attempt]
            if starts:
                await call_host(handle.launch_attempts, starts, timeout=bound, budget=bound)
            if ends:
                await call_host(handle.end_apps, ends, timeout=bound, budget=bound)
        except Exception:  # noqa: BLE001 - the host is unreachable now; a later scan retries
            self._hosts.pop(host, None)
            await asyncio.sleep(bound / 4)
            self._launching.difference_update(items)
