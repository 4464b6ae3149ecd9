"""ApplicationMaster host: many logical ApplicationMasters in one async actor.

Each logical AM runs one job of the trace (YARN's ApplicationMaster protocol):

1. at the job's submit time it registers its app (``register_apps``, batched with
   the other AMs arriving then); a job no node could ever run is rejected;
2. it heartbeats ``allocate`` with ``ask`` = its tasks that have no container yet
   and ``releases`` = containers it got but has no task for; the host sends every
   active AM's request in one call, as a long poll (the RM answers as soon as
   something is there for one of them, or after one heartbeat interval); the AMs
   whose ask is the one they sent last and that release nothing (idle) travel as
   one ``AppMark`` and are answered only when the RM has news for them;
3. each granted container gets the next task in index order (a lost task first)
   and is started on its NM (``start_containers``, batched per NM host, in the
   background so a slow NM host never delays the AMs' heartbeats; one call in flight
   per NM host, the launches granted meanwhile batched into the next) for the task's
   duration on the replay's trace clock (``TraceClock.wall_seconds``) — the durations ``JobSpec.task_durations(seed)`` gives,
   the same as the simulator's — with the container token the RM issued;
4. completed containers finish their task; a container lost, killed or preempted puts
   its task back at the front of the queue as a new attempt.  A preemption message in an
   allocate answer (YARN's ``PreemptionMessage``: containers the RM will kill at a
   deadline) is recorded (``warned``) and otherwise ignored, as most of YARN's AMs do: the
   container runs on until it finishes or its NM kills it;
5. when every task has finished once, the AM unregisters (``finish_apps``).

Attempts (YARN's RMAppAttempt, work-preserving AM restart).  ``kill_am`` crashes
one logical AM: its memory is gone and it stops heartbeating; its containers keep
running on their NMs.  The RM notices the silence (``am_expiry``), fails the
attempt and — if ``max_attempts`` allows — calls ``launch_attempts`` here
(the RM is the AM launcher).  The new attempt registers with its number and
rebuilds from the RM's answer: the tasks that already finished (never run again)
and the containers still running with their tasks (kept, not rerun); every other
task is asked for again.  An AM told RESYNC (the RM restarted) registers again
with the same attempt and merges the same answer; one told FENCED stops and
waits for the RM's next attempt; ``end_apps`` says the RM failed the app.

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

from rayrm.rm.core.clock import TraceClock
from rayrm.rm.core.model import AppSpec
from rayrm.rm.service.protocol import (FENCED, FINISHED, NAMESPACE, NORMAL, RESYNC, SHUTDOWN, AllocateRequest, AppMark,
                                      AppRegistered, AppRegistration, ContainerLaunch)
from rayrm.rm.service.client import RMClient, call_host
from rayrm.rm.service.heap import quiet_gc

#: the least wall time between the starts of two allocate calls of one host (at most one
#: heartbeat interval): the news of that window goes in one answer, so the host's call
#: rate — and its start_containers calls, one per answer and NM host — is bounded per
#: host (at most 100 a second), not per allocation
MIN_ALLOCATE_GAP = 0.010

# AM states: waiting (not submitted) -> registering -> active -> done; rejected; failed
# (the RM gave up); crashed / fenced (waiting for the RM's next attempt) -> launching.
TERMINAL = ("done", "rejected", "failed")


@dataclass(frozen=True)
class AMJob:
    """What one AM needs: the app and its per-task durations (trace seconds)."""

    spec: AppSpec
    durations: tuple[float, ...]


class _AM:
    __slots__ = ("job", "app", "num_tasks", "attempt", "state", "unplaced", "running", "finished", "releases",
                 "duplicates", "reason", "attempts", "sent_ask")

    def __init__(self, job: AMJob, attempt: int = 1, state: str = "waiting"):
        self.job = job
        self.app, self.num_tasks = job.spec.app_id, job.spec.num_tasks   # read on every call, per AM
        self.attempt = attempt
        self.state = state
        self.unplaced: deque[tuple[int, int]] = deque((t, 0) for t in range(job.spec.num_tasks))
        self.running: dict[int, tuple[int, int]] = {}          # container -> (task, attempt)
        self.finished: set[int] = set()
        self.releases: list[int] = []
        self.duplicates = 0
        self.reason = ""
        self.attempts = 0
        self.sent_ask: int | None = None     # the ask of its last full request the RM answered NORMAL

    def adopt(self, answer: AppRegistered) -> None:
        """Take what the RM says the app has: finished tasks, running containers.

        A container still held for a task the RM counts finished has completed; its
        status may still be on its way and is then ignored.
        """
        self.finished |= set(answer.finished_tasks)
        self.running = {c: e for c, e in self.running.items() if e[0] not in self.finished}
        for st in answer.running:
            if st.container not in self.running and st.task not in self.finished:
                self.running[st.container] = (st.task, st.attempt)
        busy = {t for t, _ in self.running.values()}
        self.unplaced = deque((t, a) for t, a in self.unplaced if t not in self.finished and t not in busy)


def _named(name: str):
    """The actor called ``name``, or None when it is gone: an AM host made again after its
    Ray node was lost may outlive an NM host lost with a node (their NMs are lost for good,
    so nothing is launched there again)."""
    try:
        return ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return None


@ray.remote(num_cpus=0, max_concurrency=1000)
class ApplicationMasterHost:
    """Logical AMs (see the module docstring)."""

    def __init__(self, host_id: str, rm, nm_hosts: dict, jobs: list[AMJob], *, interval_wall: float,
                 payload: str = "sleep"):
        # ``rm`` and ``nm_hosts``' values may be actor names (a restartable actor holding
        # handles among its constructor arguments makes Ray warn that a restart may fail)
        if isinstance(rm, str):
            rm = ray.get_actor(rm, namespace=NAMESPACE)
        nm_hosts = {h: _named(a) if isinstance(a, str) else a for h, a in nm_hosts.items()}
        self.host_id, self.rm_handle, self.nm_hosts = host_id, rm, nm_hosts
        self.rm = RMClient(rm, host_id)
        self.interval, self.payload = interval_wall, payload
        self.ams = {j.spec.app_id: _AM(j) for j in sorted(jobs, key=lambda j: (j.spec.submit, j.spec.app_id))}
        self.clock: TraceClock | None = None          # the replay's, from ``run``
        self.crashes = 0
        self.delivery: list[float] = []      # wall seconds, allocation (NODE_UPDATE) -> this AM got it
        self.warned: list[tuple[str, int, float, float]] = []   # preemption messages: app, container, deadline, got
        self.ray_node = ray.get_runtime_context().get_node_id()
        self._to_launch: dict[str, list[ContainerLaunch]] = defaultdict(list)
        self._launching: set[str] = set()                # NM hosts with a start_containers call out
        self._sent_any = False
        self.error: BaseException | None = None
        self._wake: asyncio.Event | None = None
        self._gap = min(MIN_ALLOCATE_GAP, interval_wall)
        self._last_allocate = 0.0
        quiet_gc()

    async def run(self, clock: TraceClock) -> dict:
        """Run every AM to the end, submitting each app at its trace time on ``clock``;
        returns per-app outcomes."""
        self.clock = clock
        self._wake = asyncio.Event()
        waiting = deque(self.ams.values())
        opened: list[str] = []          # apps submitted and not yet terminal (the loop's work)
        while waiting or opened:
            if self.error is not None:
                raise self.error
            hold = self._last_allocate + self._gap - time.time()
            if hold > 0:                       # the allocate gap (MIN_ALLOCATE_GAP)
                await asyncio.sleep(hold)
            now = time.time()
            while waiting and self.clock.wall(waiting[0].job.spec.submit) <= now:
                am = waiting.popleft()
                if self.ams[am.app] is am and am.state == "waiting":
                    am.state = "registering"
                if self.ams[am.app].state not in TERMINAL:
                    opened.append(am.app)
            current = [self.ams[a] for a in opened]
            if any(am.state in TERMINAL for am in current):
                opened = [am.app for am in current if am.state not in TERMINAL]
                current = [am for am in current if am.state not in TERMINAL]
            joining = [am for am in current if am.state in ("registering", "launching")]
            if joining:
                await self._register(joining)
            active = [am for am in current if am.state == "active"]
            next_submit = self.clock.wall(waiting[0].job.spec.submit) if waiting else None
            wait = self.interval if next_submit is None else max(0.0, min(self.interval, next_submit - time.time()))
            if not active and not self._sent_any:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
                except asyncio.TimeoutError:
                    pass
                continue
            # once it has had an AM, the host heartbeats even with none active: the RM judges
            # an AM's silence against its host's heartbeats (rm/service/liveness.py)
            self._sent_any = True
            self._last_allocate = time.time()
            # the AMs submitted, not ended and not running as such (crashed, fenced, registering
            # again): the mark leaves them out, so the RM stops hearing a crashed one
            left = tuple(sorted(a for a in opened if self.ams[a].state not in TERMINAL + ("active",)))
            await self._heartbeat(active, wait, left)
        return self.outcome()


    def _current(self, am: _AM) -> bool:
        """Whether ``am`` is still the app's AM (not crashed or replaced by a later attempt)."""
        return self.ams.get(am.app) is am

    async def _register(self, ams: list[_AM]) -> None:
        answers = await self.rm.register_apps([AppRegistration(am.job.spec, am.attempt, self.ray_node) for am in ams])
        for am, ans in zip(ams, answers):
            if not self._current(am):
                continue
            if ans.accepted:
                am.state = "active"
                am.adopt(ans)
            elif ans.action == FENCED:
                am.state, am.reason = "fenced", ans.reason
            elif ans.action == SHUTDOWN:          # ended; after a host restart, as finished as the RM says
                am.finished |= set(ans.finished_tasks)
                am.state = "done" if len(am.finished) == am.job.spec.num_tasks else "failed"
            else:
                am.state, am.reason = "rejected", ans.reason

    async def _heartbeat(self, active: list[_AM], wait: float, left: tuple[str, ...] = ()) -> None:
        """One allocate for every active AM: a full request for those whose ask changed or
        that release something, the others (idle) in one ``AppMark`` that leaves out ``left``
        (the RM answers them only when it has news for them)."""
        full, idle_ams = [], []
        for am in active:
            if am.releases or am.sent_ask != len(am.unplaced):
                full.append(am)
            else:
                idle_ams.append(am)
        requests = [AllocateRequest(am.app, am.attempt, len(am.unplaced), tuple(am.releases)) for am in full]
        for am in full:
            am.releases = []
            am.sent_ask = len(am.unplaced)
        responses = await self.rm.allocate(requests, AppMark(left, wait))
        got = time.time()
        self.delivery.extend(got - a.allocated for resp in responses for a in resp.allocated)
        # answers to the full requests in order, then those idle AMs have news for
        pairs = list(zip(full, requests, responses))
        by_app = {am.app: am for am in idle_ams}
        empty = AllocateRequest("", 0, 0)
        pairs += [(by_app[resp.app], empty, resp) for resp in responses[len(requests):] if resp.app in by_app]
        launches: dict[str, list[ContainerLaunch]] = defaultdict(list)
        for am, req, resp in pairs:
            if not self._current(am):
                continue                             # crashed while the call was out
            if resp.preemption is not None:
                self.warned += [(am.app, cid, deadline, got) for cid, deadline in resp.preemption.containers]
            if resp.action != NORMAL:
                am.releases.extend(req.releases)     # not processed: give them back next time
                am.sent_ask = None                   # the RM did not take the ask: send it in full
                if resp.action == RESYNC:
                    am.state = "registering"
                elif resp.action == FENCED:
                    am.state, am.reason = "fenced", "fenced"
                elif resp.action == SHUTDOWN:
                    am.state = "done" if len(am.finished) == am.job.spec.num_tasks else "failed"
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
                seconds = self.clock.wall_seconds(am.job.durations[task])
                launches[a.host].append(ContainerLaunch(a.container, am.app, task, attempt, a.node,
                                                        seconds, self.payload, token=a.token))
        if launches:
            self._queue_launches(launches)
        ams = self.ams
        done = [am for am in active if am.state == "active" and len(am.finished) == am.num_tasks
                and ams.get(am.app) is am]
        if done:
            actions = await self.rm.finish_apps([(am.app, am.attempt) for am in done])
            for am, action in zip(done, actions):
                if not self._current(am):
                    continue
                if action == RESYNC:
                    am.state = "registering"           # the RM lost track of it: register, finish again
                elif action == FENCED:
                    am.state, am.reason = "fenced", "fenced"
                else:
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

    def _queue_launches(self, launches: dict[str, list[ContainerLaunch]]) -> None:
        """Backpressure: at most one start_containers call in flight per NM host; launches
        granted meanwhile wait and go out together in the next call (so the batch grows
        when an NM host is slow, instead of the calls piling up)."""
        for h, items in launches.items():
            self._to_launch[h].extend(items)
            if h not in self._launching:
                self._launching.add(h)
                asyncio.get_running_loop().create_task(self._launch_on(h))

    async def _launch_on(self, h: str) -> None:
        """startContainers on NM host ``h`` until nothing waits for it; a launch that fails
        puts its task back and releases the container."""
        try:
            while self._to_launch[h]:
                batch, self._to_launch[h] = self._to_launch[h], []
                try:
                    if self.nm_hosts.get(h) is None:
                        raise TimeoutError(f"NM host {h} is gone")
                    result = await call_host(self.nm_hosts[h].start_containers, batch)
                except (ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError, TimeoutError) as e:
                    result = e          # a lost or silent NM host, or one whose Ray node is gone
                except Exception as e:  # noqa: BLE001 - a bug, not a lost NM host: run() raises it
                    self.error = e
                    return
                for i, launch in enumerate(batch):
                    ok = not isinstance(result, BaseException) and result[i] == "ok"
                    am = self.ams.get(launch.app)
                    if not ok and am is not None and am.running.pop(launch.container, None) is not None:
                        am.unplaced.appendleft((launch.task, launch.attempt))   # it never ran
                        am.releases.append(launch.container)
        finally:
            self._launching.discard(h)

    # ----- failures: the AM crash fault and the RM's AM launcher ---------------------

    async def kill_am(self, app: str) -> bool:
        """Crash the app's AM: its state is lost and it goes silent (its containers run on).

        Only an attempt the RM tracks can crash: a registered one (active) or one the RM
        launched (launching), whose silence the RM expires.  An AM still registering is
        left alone — the RM may not know its app yet, or (its host restarted) the app may
        have ended already — because nobody would ever expire it or launch its successor,
        and the host would wait for it for ever."""
        am = self.ams.get(app)
        if am is None or am.state not in ("active", "launching"):
            return False
        self.ams[app] = _AM(am.job, am.attempt, "crashed")
        self.crashes += 1
        return True

    async def launch_attempts(self, items: list[tuple[str, int]]) -> None:
        """The RM starts attempt ``attempt`` of each app (YARN's AMLauncher); idempotent.
        Across a partitioned link it arrives once the link heals; it replaces an attempt
        the RM fenced meanwhile."""
        await self.rm.link.wait_healed()
        for app, attempt in items:
            am = self.ams.get(app)
            if am is None or am.state in TERMINAL or am.attempt >= attempt:
                continue
            self.ams[app] = _AM(am.job, attempt, "launching")
        if self._wake is not None:
            self._wake.set()

    async def end_apps(self, apps: list[str]) -> None:
        """The RM failed these apps (no attempts left): their AMs stop for good."""
        await self.rm.link.wait_healed()
        for app in apps:
            am = self.ams.get(app)
            if am is not None and am.state not in TERMINAL:
                am.state, am.reason = "failed", "the RM failed the application"
        if self._wake is not None:
            self._wake.set()

    async def link_fault(self, fault) -> None:
        """A partition, slow or lossy link to the RM from now on (``fault_rules.LinkFault``)."""
        self.rm.link.add(fault)

    async def outcome_now(self) -> dict:
        """``outcome()`` while ``run`` still goes on (the driver interrupted the replay)."""
        return self.outcome()

    def outcome(self) -> dict:
        """Per app: final state, attempt, tasks finished, attempts launched, duplicate finishes."""
        apps = {am.app: {"state": am.state, "attempt": am.attempt, "finished": len(am.finished),
                         "tasks": am.job.spec.num_tasks, "attempts": am.attempts,
                         "duplicates": am.duplicates, "reason": am.reason}
                for am in self.ams.values()}
        return {"apps": apps, "calls": self.rm.calls, "crashes": self.crashes, "delivery": list(self.delivery),
                "link_lost": dict(self.rm.link.lost), "warned": list(self.warned)}

    async def ready(self) -> bool:
        """Before t = 0: one call to every NM host and the RM, so no first call pays for a connection."""
        await asyncio.gather(self.rm_handle.progress.remote(),
                             *(h.health.remote() for h in self.nm_hosts.values() if h is not None))
        return True
