"""Calling the ResourceManager across its restarts (NM and AM hosts use this).

A call to the RM actor fails with ``RayActorError`` (``ActorUnavailableError``
while Ray restarts it) when the RM dies.  The caller repeats it — with the same
``request_id``, so the recovered RM answers it as it did before if it had already
journaled it, and applies it once otherwise — backing off from 50 ms to at most
``MAX_DELAY`` so that callers find the restarted RM within a quarter second, for
up to ``BUDGET`` seconds before giving up.
"""

from __future__ import annotations

import asyncio
import time

import ray

MAX_DELAY = 0.25
BUDGET = 60.0


async def call_with_retry(method, *args):
    """``await method.remote(*args)``, repeated while the actor is unreachable."""
    deadline, delay = time.time() + BUDGET, 0.05
    while True:
        try:
            return await method.remote(*args)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
            if time.time() > deadline:
                raise
            await asyncio.sleep(delay)
            delay = min(MAX_DELAY, delay * 2)
