"""The containers an NM host runs: started on a granted launch, watched to their end.

YARN's ContainerManager on each NM: ``start`` launches each granted container on its NM
through the host's executor (``rayrm.nodes.executors``), refusing a launch whose container
token (rm/service/protocol.py) is not the RM's for that container, app and node — an AM
can start only what the RM granted its own app — and reporting the refusal in the NM's
next heartbeat so the RM logs it.  A container started again (a retried call) is answered
"ok" and not started twice.  When a container ends, its COMPLETE status waits for the RM's
acknowledgement and the NM beats out of band.  ``prewarm`` makes the first containers as
fast as the rest, before t = 0.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Callable

import ray

from rayrm.nodes.executors import Launcher
from rayrm.nodes.nm import NodeManagerState
from rayrm.rm.service.protocol import (COMPLETE, FAILED, FINISHED, KILLED, RUNNING, ContainerLaunch, ContainerStatus,
                                      token_valid)


class HostContainers:
    """One host's containers (module docstring).  ``noted(nm, ended)``: the NM has news to
    report (``ended``: a container of it ended, so it beats at once); ``stats`` counts
    "launched" and "refused_launch" in the host's measurements."""

    def __init__(self, launcher: Launcher, secret: bytes, stats: dict,
                 noted: Callable[[str, bool], None]):
        self.launcher, self.secret, self.stats, self.noted = launcher, secret, stats, noted
        self._warm_count = 0
        self._warm_target = 0
        self._warm_done: asyncio.Event | None = None

    def start(self, nms: dict[str, NodeManagerState], launches: list[ContainerLaunch]) -> list[str]:
        """YARN startContainers: launch each granted container on its NM; "ok" or why not."""
        out = []
        for launch in launches:
            nm = nms.get(launch.node)
            if nm is None or not nm.alive:
                self.stats["refused_launch"] += 1
                out.append(f"node {launch.node} is not running on this host")
                continue
            if self.secret and not token_valid(self.secret, launch):
                # Fencing: only the RM's grant for this container, app and node starts it.
                self.stats["refused_launch"] += 1
                nm.refused.append((launch.container, launch.app, "invalid container token"))
                self.noted(launch.node, False)
                out.append("invalid container token")
                continue
            if launch.container in nm.containers or launch.container in nm.unacked:
                out.append("ok")
                continue
            launched = time.time()
            ref = self.launcher.launch(launch.container, launched + launch.seconds, launch.payload)
            nm.containers[launch.container] = (launch, launched, ref)
            nm.new.append(ContainerStatus(launch.container, launch.app, launch.task, launch.attempt,
                                          launch.node, RUNNING, launched))
            self.noted(launch.node, False)
            if isinstance(ref, asyncio.Future):          # a timer of this loop: a callback, no task
                ref.add_done_callback(functools.partial(self._timer_ended, nm, launch, launched))
            else:
                asyncio.get_running_loop().create_task(self._watch(nm, launch, launched, ref))
            self.stats["launched"] += 1
            out.append("ok")
        return out

    def kill(self, nm: NodeManagerState, cid: int) -> None:
        """Kill container ``cid`` of ``nm`` if it runs (it ends KILLED), once: the RM may list
        it again (a restarted RM sends the kills it issued again)."""
        entry = nm.containers.get(cid)
        if entry is not None and cid not in nm.killed:
            nm.killed.add(cid)
            self.stats["killed"] = self.stats.get("killed", 0) + 1
            self.launcher.kill(entry[2])

    async def _watch(self, nm: NodeManagerState, launch: ContainerLaunch, launched: float, ref) -> None:
        start = finish = None
        exit_, detail = FINISHED, ""
        try:
            start, finish = await ref
        except (ray.exceptions.TaskCancelledError, asyncio.CancelledError):
            exit_, finish = KILLED, time.time()
        except ray.exceptions.RayError as e:
            exit_, finish, detail = FAILED, time.time(), type(e).__name__
        self._ended(nm, launch, launched, start, finish, exit_, detail)

    def _timer_ended(self, nm: NodeManagerState, launch: ContainerLaunch, launched: float, fut) -> None:
        if fut.cancelled():
            self._ended(nm, launch, launched, None, time.time(), KILLED, "")
        else:
            self._ended(nm, launch, launched, *fut.result(), FINISHED, "")

    def _ended(self, nm: NodeManagerState, launch: ContainerLaunch, launched: float, start, finish,
               exit_: str, detail: str) -> None:
        """A container ended: its COMPLETE status waits for the RM's ack, sent out of band."""
        nm.containers.pop(launch.container, None)
        nm.killed.discard(launch.container)
        if not nm.alive:
            return
        nm.unacked[launch.container] = ContainerStatus(
            launch.container, launch.app, launch.task, launch.attempt, launch.node, COMPLETE,
            launched, start, finish, exit_, detail)
        self.noted(nm.spec.name, True)

    # ----- warm-up ----------------------------------------------------------------

    async def prewarm(self, host, count: int, timeout: float) -> int:
        """Task executor: start ``count`` worker processes on this Ray node and leave them
        idle (each waits, calling ``host.arrive``, until all have arrived, so they are
        distinct); actor executor: run a few empty containers through the executor actor.
        Returns the distinct worker processes (task) or runs."""
        launcher = self.launcher
        if launcher.kind == "actor":
            kind = "cpu" if launcher.actor is not None else "sleep"
            refs = [launcher.launch(-1 - i, time.time(), kind) for i in range(max(1, min(count, 8)))]
            return len(await asyncio.gather(*refs))
        if count <= 0:
            return 0
        self._warm_count, self._warm_target = 0, count
        self._warm_done = asyncio.Event()
        refs = launcher.warm_tasks(host, count)
        try:
            await asyncio.wait_for(self._warm_done.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        self._warm_done.set()
        pids = await asyncio.gather(*refs)
        return len(set(pids))

    async def arrive(self) -> None:
        """A warm task checks in and waits until all of them have."""
        self._warm_count += 1
        if self._warm_count >= self._warm_target:
            self._warm_done.set()
        await self._warm_done.wait()
