"""Calling the ResourceManager across its restarts (NM and AM hosts use this).

``RMClient`` is the hosts' typed side of the protocol (rm/service/protocol.py): one
method per host call of the RM's table (``HOST_CALLS``, rm/service/calls.py), with the
handler's arguments but for those the client fills in — ``caller``, ``request_id``
(the caller's next) and ``sent`` (the wall time it is sent).

The calls travel on the RM's channel (``rm/service/channel.py``).  A call fails with
``ChannelBroken`` when the RM dies (its stream closes), and finding the restarted RM
fails with ``RayActorError`` (``ActorUnavailableError`` while Ray restarts it).  The
caller repeats it — with the same ``request_id``, so the recovered RM answers it as it
did before if it had already journaled it, and applies it once otherwise — backing off
from 50 ms to at most ``MAX_DELAY`` so that callers find the restarted RM within a
quarter second, for up to ``BUDGET`` seconds before giving up.

A host's calls pass its ``Link`` (the partition, slow and lossy link faults of
``rayrm.rm.core.fault_rules.link_passage``): a call lost on the way, or whose answer is
lost, is repeated the same way, with the same ``request_id``; while the link is cut the
host waits for it to heal, and the retry budget runs from then, so every call ends.

Calls to a host actor (an AM's ``start_containers`` on an NM host, the RM's
``launch_attempts`` on an AM host) go through ``call_host``: each try is bounded by a
timeout and repeated — the calls are idempotent (a container or attempt already started
is answered as started) — for at most a budget, then ``TimeoutError``: a host that never
answers (hung, or behind a cut link) does not hold its caller.

Ray is imported when a call is made, not with this module: ``rm.service`` is the
Ray-free protocol state.
"""

from __future__ import annotations

import asyncio
import random
import time
import zlib

from rayrm.rm.core.fault_rules import LinkFault, link_passage
from rayrm.rm.service.calls import Call
from rayrm.rm.service.channel import Channel, ChannelBroken

MAX_DELAY = 0.25
BUDGET = 60.0
#: wall seconds a try of a call to a host actor may take before it is sent again (``call_host``)
HOST_CALL_TIMEOUT = 10.0


class CallLost(Exception):
    """A call, or its answer, lost on a faulty link; ``retry_at``: when to send it again."""

    def __init__(self, retry_at: float):
        super().__init__(f"lost; retry at {retry_at:.3f}")
        self.retry_at = retry_at


class Link:
    """The link between one host and the RM: the link faults on it, and what it lost.

    ``faults`` are ``LinkFault``s on the wall clock; the draws of a lossy link come from a
    generator seeded with the host's name, so a replay's losses depend on the schedule of
    its calls alone.  ``lost`` counts calls lost ("request") and answers lost ("answer").
    """

    def __init__(self, name: str = ""):
        self.faults: list[LinkFault] = []
        self.rng = random.Random(zlib.crc32(name.encode()))
        self.lost = {"request": 0, "answer": 0}
        self.delayed = 0.0

    def add(self, fault: LinkFault) -> None:
        self.faults = [f for f in self.faults if f.end > time.time()] + [fault]

    def healed_at(self) -> float:
        """When the last partition on the link ends (0: none)."""
        return max((f.end for f in self.faults if f.kind == "partition"), default=0.0)

    def cut(self, now: float | None = None) -> float:
        """When the partition over ``now`` heals, 0 if the link is not cut."""
        now = time.time() if now is None else now
        return max((f.end for f in self.faults if f.kind == "partition" and f.active(now)), default=0.0)

    async def wait_healed(self) -> None:
        """Until the partition over now heals (at once when the link is not cut): a call the
        RM makes on the host crosses the same link."""
        healed = self.cut()
        if healed:
            await asyncio.sleep(max(0.0, healed - time.time()))

    async def call(self, method, args):
        """``await method.remote(*args)`` through the link; raises CallLost when it loses it."""
        if not self.faults:
            return await method.remote(*args)
        p = link_passage(self.faults, time.time(), self.rng.random(), self.rng.random())
        if p.delay > 0:
            self.delayed += p.delay
            await asyncio.sleep(p.delay)
        if p.lost == "request":
            self.lost["request"] += 1
            raise CallLost(p.retry_at)
        answer = await method.remote(*args)
        back = self.cut()
        if p.lost == "answer" or back:
            self.lost["answer"] += 1
            raise CallLost(max(back, time.time()))
        return answer


async def call_with_retry(method, *args, link: Link | None = None):
    """``await method.remote(*args)``, repeated while the actor is unreachable or the link
    loses the call, for at most ``BUDGET`` seconds after the link's last partition heals."""
    import ray  # noqa: PLC0415 - service must not import Ray at import time
    start, delay = time.time(), 0.05
    while True:
        try:
            if link is None:
                return await method.remote(*args)
            return await link.call(method, args)
        except CallLost as lost:
            wait = max(0.0, lost.retry_at - time.time())
            if time.time() + wait > max(start, link.healed_at()) + BUDGET:
                raise TimeoutError(f"no answer from the RM for {BUDGET:.0f}s after the link healed") from None
            await asyncio.sleep(wait or delay)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ChannelBroken):
            if time.time() > max(start, link.healed_at() if link else 0.0) + BUDGET:
                raise
            await asyncio.sleep(delay)
            delay = min(MAX_DELAY, delay * 2)


async def call_host(method, *args, timeout: float = HOST_CALL_TIMEOUT, budget: float = BUDGET):
    """``await method.remote(*args)`` on a host actor, each try bounded by ``timeout`` wall
    seconds and repeated, for at most ``budget`` seconds in all; TimeoutError after that.
    The calls it makes are idempotent, so a try that was applied late is harmless; a dead
    host's error (RayActorError) is raised at once, as before."""
    deadline = time.time() + budget
    while True:
        left = deadline - time.time()
        try:
            return await asyncio.wait_for(_awaited(method.remote(*args)), min(timeout, max(left, 0.0)))
        except asyncio.TimeoutError:
            if time.time() >= deadline:
                raise TimeoutError(f"no answer from the host for {budget:g}s") from None


async def _awaited(ref):
    return await ref


class RMClient:
    """One host's calls to the RM actor ``rm``, as ``caller``, with increasing request ids.

    Each call is retried with its own request id while the RM restarts, so the RM
    applies it at most once (see the module docstring).  ``calls`` counts them.  The
    calls travel on the RM's channel (rm/service/channel.py), found through the Ray
    call ``rm.channel``, so a restarted RM is found at its new address.
    """

    def __init__(self, rm, caller: str):
        self.rm, self.caller = rm, caller
        self.channel = Channel(self._resolve)
        self.link = Link(caller)
        # ids start from the clock in microseconds: a host Ray restarted (same caller name)
        # never reuses an id the RM still holds the answer of
        self.request_id = int(time.time() * 1e6)
        self.calls = 0

    def _next(self) -> int:
        self.request_id += 1
        self.calls += 1
        return self.request_id

    async def _resolve(self) -> tuple[str, int, bytes]:
        return await self.rm.channel.remote()

    async def _call(self, call: Call, *args):
        return await call_with_retry(self.channel.method(call.value), self.caller, self._next(), *args,
                                     link=self.link)

    async def register_nodes(self, regs: list) -> list[str]:
        return await self._call(Call.REGISTER_NODES, regs)

    async def node_heartbeat(self, beats: list, idle: tuple = (), mark=None) -> list:
        return await self._call(Call.NODE_HEARTBEAT, beats, idle, time.time(), mark)

    async def register_apps(self, regs: list) -> list:
        return await self._call(Call.REGISTER_APPS, regs)

    async def allocate(self, requests: list, mark=None) -> list:
        return await self._call(Call.ALLOCATE, requests, time.time(), mark)

    async def finish_apps(self, items: list[tuple[str, int]]) -> list[str]:
        return await self._call(Call.FINISH_APPS, items)

    async def lose_node(self, node: str, detail: str = "lost", departed: bool = False) -> list[int]:
        """Declare one of this host's NMs LOST now (``departed``: it left the cluster for
        good); idempotent by itself: no request id."""
        return await call_with_retry(self.channel.method(Call.LOSE_NODE.value), node, detail, departed,
                                     link=self.link)
