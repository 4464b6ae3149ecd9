"""ApplicationMaster host: many logical ApplicationMasters in one async actor.

Each logical AM runs one job of the trace (YARN's ApplicationMaster protocol):

1. at the job's submit time it registers its app (``register_apps``, batched with
   the other AMs arriving then); a job no node could ever run is rejected;
2. it heartbeats ``allocate`` with ``ask`` = its tasks that have no container yet
   and ``releases`` = containers it got but has no task for; the host sends every
   active AM's request in one call, as a long poll (the RM answers as soon as
   something is there for one of them, or after one heartbeat interval);
3. each granted container gets the next task in index order (a lost task first)
   and is started on its NM (``start_containers``, batched per NM host) for the
   task's duration × time_scale — the durations ``JobSpec.task_durations(seed)``
   gives, the same as the simulator's;
4. completed containers finish their task; a container lost or killed puts its
   task back at the front of the queue as a new attempt;
5. when every task has finished once, the AM unregisters (``finish_apps``).

A task is assigned to at most one container at a time and is finished at most
once, so "every task exactly once" holds by construction; a second COMPLETE for
a finished task would be counted in ``duplicates``.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict, deque
from dataclasses import dataclass

import ray

from rm.model import AppSpec
from rm.protocol import (FENCED, FINISHED, RESYNC, AllocateRequest, AppRegistration,
                         ContainerLaunch)


@dataclass(frozen=True)
class AMJob:
    """What one AM needs: the app and its per-task durations (trace seconds)."""

    spec: AppSpec
    durations: tuple[float, ...]


class _AM:
    __slots__ = ("job", "attempt", "state", "unplaced", "running", "finished", "releases",
                 "duplicates", "reason", "attempts")

    def __init__(self, job: AMJob):
        self.job = job
        self.attempt = 1
        self.state = "waiting"             # waiting -> active -> done | rejected
        self.unplaced: deque[tuple[int, int]] = deque((t, 0) for t in range(job.spec.num_tasks))
        self.running: dict[int, tuple[int, int]] = {}          # container -> (task, attempt)
        self.finished: set[int] = set()
        self.releases: list[int] = []
        self.duplicates = 0
        self.reason = ""
        self.attempts = 0

    @property
    def app(self) -> str:
        return self.job.spec.app_id


@ray.remote(num_cpus=0, max_concurrency=1000)
class ApplicationMasterHost:
    """Logical AMs (see the module docstring)."""

    def __init__(self, host_id: str, rm, nm_hosts: dict, jobs: list[AMJob], *, time_scale: float,
                 interval_wall: float, payload: str = "sleep"):
        self.host_id, self.rm, self.nm_hosts = host_id, rm, nm_hosts
        self.time_scale, self.interval, self.payload = time_scale, interval_wall, payload
        self.ams = {j.spec.app_id: _AM(j) for j in sorted(jobs, key=lambda j: (j.spec.submit, j.spec.app_id))}
        self._rid = 0
        self.start_wall = 0.0
        self.calls = 0

    async def _call(self, method: str, payload, *extra):
        self._rid += 1
        rid, delay = self._rid, 0.05
        for attempt in range(40):
            try:
                self.calls += 1
                return await getattr(self.rm, method).remote(self.host_id, rid, payload, *extra)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                if attempt == 39:
                    raise
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)

    async def run(self, start_wall: float) -> dict:
        """Run every AM to the end; returns per-app outcomes."""
        self.start_wall = start_wall
        waiting = deque(self.ams.values())
        while any(am.state in ("waiting", "active") for am in self.ams.values()):
            now = time.time()
            arrived = []
            while waiting and self._wall(waiting[0].job.spec.submit) <= now:
                arrived.append(waiting.popleft())
            if arrived:
                await self._register(arrived)
            active = [am for am in self.ams.values() if am.state == "active"]
            next_submit = self._wall(waiting[0].job.spec.submit) if waiting else None
            if not active:
                if next_submit is not None:
                    await asyncio.sleep(max(0.0, next_submit - time.time()))
                continue
            wait = self.interval
            if next_submit is not None:
                wait = max(0.0, min(wait, next_submit - time.time()))
            await self._heartbeat(active, wait)
        return self.outcome()

    def _wall(self, trace_time: float) -> float:
        return self.start_wall + trace_time * self.time_scale

    async def _register(self, ams: list[_AM]) -> None:
        answers = await self._call("register_apps", [AppRegistration(am.job.spec, am.attempt) for am in ams])
        for am, ans in zip(ams, answers):
            if ans.accepted:
                am.state = "active"
            else:
                am.state, am.reason = "rejected", ans.reason

    async def _heartbeat(self, active: list[_AM], wait: float) -> None:
        requests = [AllocateRequest(am.app, am.attempt, len(am.unplaced), tuple(am.releases))
                    for am in active]
        for am in active:
            am.releases = []
        responses = await self._call("allocate", requests, wait)
        launches: dict[str, list[ContainerLaunch]] = defaultdict(list)
        for resp in responses:
            am = self.ams[resp.app]
            if resp.action == RESYNC:
                await self._register([am])
                continue
            if resp.action == FENCED:
                am.state, am.reason = "done", "fenced"
                continue
            for st in resp.completed:
                self._completed(am, st)
            for a in resp.allocated:
                if not am.unplaced:
                    am.releases.append(a.container)
                    continue
                task, attempt = am.unplaced.popleft()
                am.running[a.container] = (task, attempt)
                am.attempts += 1
                seconds = am.job.durations[task] * self.time_scale
                launches[a.host].append(ContainerLaunch(a.container, am.app, task, attempt, a.node,
                                                        seconds, self.payload))
        if launches:
            await self._launch(launches)
        done = [am for am in active if am.state == "active" and len(am.finished) == am.job.spec.num_tasks]
        if done:
            await self._call("finish_apps", [(am.app, am.attempt) for am in done])
            for am in done:
                am.state = "done"

    def _completed(self, am: _AM, st) -> None:
        entry = am.running.pop(st.container, None)
        if entry is None:
            return
        task, attempt = entry
        if (st.exit or FINISHED) == FINISHED:
            if task in am.finished:
                am.duplicates += 1
            am.finished.add(task)
        elif task not in am.finished:
            am.unplaced.appendleft((task, attempt + 1))

    async def _launch(self, launches: dict[str, list[ContainerLaunch]]) -> None:
        hosts = list(launches)
        results = await asyncio.gather(
            *(self.nm_hosts[h].start_containers.remote(launches[h]) for h in hosts),
            return_exceptions=True)
        for h, result in zip(hosts, results):
            if isinstance(result, BaseException) and not isinstance(result, ray.exceptions.RayActorError):
                raise result                        # a bug, not a lost NM host
            for i, launch in enumerate(launches[h]):
                ok = not isinstance(result, BaseException) and result[i] == "ok"
                if not ok:                          # the NM is gone: ask again, give it back
                    am = self.ams[launch.app]
                    if am.running.pop(launch.container, None) is not None:
                        am.unplaced.appendleft((launch.task, launch.attempt))   # it never ran
                        am.releases.append(launch.container)

    def outcome(self) -> dict:
        """Per app: final state, tasks finished, attempts launched, duplicate finishes."""
        apps = {am.app: {"state": am.state, "finished": len(am.finished),
                         "tasks": am.job.spec.num_tasks, "attempts": am.attempts,
                         "duplicates": am.duplicates, "reason": am.reason}
                for am in self.ams.values()}
        return {"apps": apps, "calls": self.calls}

    async def ready(self) -> bool:
        """Before t = 0: one call to every NM host and the RM, so no first call pays for a connection."""
        await asyncio.gather(self.rm.progress.remote(), *(h.health.remote() for h in self.nm_hosts.values()))
        return True
