"""The discrete-event simulator: the scheduling core driven by a virtual clock.

The engine is a heap of events keyed by (time, priority, sequence) as in SimPy's
``core.py``: equal times resolve by priority — task completions first (they free
resources), then faults and the steps of their recovery, nodes leaving, nodes
joining, and jobs arriving — and then by the order events were pushed, so a run
is a pure function of the config and the seed.  All events of one instant are
applied before the scheduler's offer rule runs once (``OnlineScheduler.schedule``,
tsf-paper §V-D), which is the moment "resources free up or jobs arrive".

Events:

* job arrival — ``submit`` the app; a job no live node could run is rejected
  (``RunLog.reject`` with the reason) and the run goes on;
* task completion — release the container; the job finishes with its last task;
* node leave — its containers are *lost*: each attempt ends as ``lost`` and its
  task is asked for again (a new attempt, submitted at the loss);
* node join — a new node, or a lost one coming back empty;
* fault — the config's ``faults:`` and ``faults=`` specs, each step of a crash and its
  recovery at the replay's protocol times (``rayrm.rm.sim.faults``, following the fault
  rules the RM service follows too, ``rayrm.rm.core.fault_rules``).  While the RM is down
  (kill-rm) nothing is scheduled, and arrivals, joins and leaves wait for it.

Task durations come from ``JobSpec.task_durations(seed)`` (or its compiled twin), the same in every mode.

Launch jitter (``launch_jitter`` > 0): a container's task starts a uniform random
0..``launch_jitter`` trace seconds after its allocation and holds the resources from
the allocation on, as a real NodeManager's container launch does.  The paper's model,
and the default, is an instant start.  The draws come from their own stream, seeded by
(seed, ``jitter_seed``), so the durations stay those of the seed; ``rayrm.rm.sim.sensitivity``
re-runs a trace over several jitter seeds to show how much a run's outcome owes to
the exact order of events.
The run is recorded through ``rayrm.rm.runs.log.RunLog``: one row per task attempt, and
a share row per app whenever its running count changes (and for every app when
the cluster changes, since h_i changes with it).
"""

from __future__ import annotations

from array import array
import sys
import time as _time
import zlib
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rayrm.rm.core.errors import InputError
from rayrm.rm.core.model import paused_gc
from rayrm.rm.core.native import compiled, core_name
from rayrm.rm.core.policies import PolicyError, policy_for_run
from rayrm.rm.core.policies.plugins import policy_source
from rayrm.rm.core.shares import share_units
from rayrm.rm.runs.log import RunLog, run_log
from rayrm.rm.core.queues.scheduler import make_scheduler
from rayrm.rm.core.faults import config_faults
from rayrm.rm.sim.events import event_heap
from rayrm.rm.sim.faults import FaultModel
from rayrm.rm.sim.preemption import SimPreemption

if TYPE_CHECKING:
    from rayrm.rm.core.config import ExperimentConfig

# Priorities of events at one instant (lower first); a preemption kill after the
# completions (a container finishing at its deadline is spared), a wake-up last.
COMPLETE, FAULT, LEAVE, JOIN, ARRIVE, KILL, WAKE = 0, 1, 2, 3, 4, 5, 6

#: show a progress bar when a run lasts longer than this (wall seconds)
PROGRESS_DELAY = 3.0
#: on a stderr that is not a terminal, a plain progress line this often (wall seconds)
PLAIN_EVERY = 10.0


class _Job:
    """The simulator's side of one job: its durations and which tasks are left."""

    __slots__ = ("spec", "app_id", "num_tasks", "submit", "durations", "next_task", "retry",
                 "attempts", "done", "units")

    def __init__(self, spec, durations):
        self.spec = spec
        self.app_id = spec.app.app_id
        self.num_tasks = spec.app.num_tasks
        self.submit = spec.app.submit
        self.durations = durations      # per-task durations (seconds), array('d'): 8 bytes a task
        self.next_task = 0              # the next never-started task
        self.retry: deque = deque()     # (task, submit) of lost tasks asked again
        self.attempts: dict[int, int] = {}
        self.done = 0
        self.units = (0.0, 0.0, 0.0, 0.0)


class Simulation:
    """One run of a config under one policy; ``run()`` returns the filled RunLog."""

    def __init__(self, config: "ExperimentConfig", policy: str | None = None, seed: int | None = None,
                 launch_jitter: float = 0.0, jitter_seed: int = 0, faults=(),
                 out: str | Path | None = None, fmt: str | None = None, until: float | None = None):
        self.config = config
        if until is not None and not until >= 0:
            raise InputError(f"--until must be zero or a positive trace time, got {until}")
        self.until = until            # stop before the first instant after this trace time
        self.policy_name = policy or config.policy
        self.seed = config.seed if seed is None else int(seed)
        if not launch_jitter >= 0:
            raise InputError(f"launch jitter must be zero or positive, got {launch_jitter}")
        self.launch_jitter = float(launch_jitter)
        self._jitter = np.random.default_rng(
            [self.seed & 0xFFFFFFFF, int(jitter_seed) & 0xFFFFFFFF, zlib.crc32(b"launch")])
        run = config.run
        self.scheduler = make_scheduler(policy_for_run(self.policy_name, run), config.dims, config.nodes,
                                        config.queues)
        self.cluster = self.scheduler.cluster
        self.total_tasks = sum(j.app.num_tasks for j in config.jobs)
        # with ``out`` the log streams its rows to the run directory as the run goes
        self.log = run_log(config.dims, mode="sim", policy=self.policy_name, name=config.name, seed=self.seed,
                          out=out, fmt=fmt, total_tasks=self.total_tasks)
        if not config.queues.flat:
            self.log.queues = config.queues.to_list()
        self.heap = event_heap()        # the selected core's (rayrm.rm.core.native)
        self._durations = compiled("_arrival").task_durations if core_name() == "native" else None
        self.jobs: dict[str, _Job] = {}
        self.running: dict[int, tuple] = {}   # container id -> (job, task, attempt)
        self.now = 0.0
        self.finished_tasks = 0
        for spec in config.nodes:
            self.log.add_node(spec, 0.0)
        known = {n.name for n in config.nodes}
        for k, ev in enumerate(config.node_events):     # sorted by time
            if ev.spec is None and ev.node not in known:
                raise InputError(f"node {ev.node!r} leaves at {ev.time:g} s but no node group or "
                                 f"earlier join defines it", file=str(config.path) if config.path else None,
                                 field="cluster.events")
            known.add(ev.node)
            self._push(ev.time, JOIN if ev.spec is not None else LEAVE, ev)
        for job in config.jobs:
            self._push(job.app.submit, ARRIVE, job)
        self.rm_up = 0.0            # kill-rm: the RM is down until then
        self.faults = None
        fault_list = config_faults(config, faults)
        if fault_list:
            self.faults = FaultModel(self, fault_list)
        self.preemption = None
        if config.preemption.enabled:
            self.preemption = SimPreemption(self, config.preemption, config.queues, KILL, WAKE)

    def _push(self, t: float, priority: int, payload) -> None:
        self.heap.push(t, priority, payload)

    def schedule_fault(self, t: float, event: tuple) -> None:
        """A step of a fault at ``t`` (priority FAULT), handed to ``FaultModel.handle`` then."""
        self._push(t, FAULT, event)

    # ----- the loop ----------------------------------------------------------------

    def run(self, progress: bool | None = None) -> RunLog:
        """Pop events instant by instant until none are left (or, with ``until``, none
        is due by then); returns the run log.

        The cyclic garbage collector is paused meanwhile: the run allocates millions of
        small acyclic objects, and full collections over them cost about 10% of the run.
        """
        bar = _progress(self.total_tasks, progress)
        try:
            with paused_gc():
                self._loop(bar)
        finally:
            if bar is not None:
                bar.close()
        if self.stopped_early:
            self._cut_short()
        else:
            self._strand()
        return self.log

    @property
    def stopped_early(self) -> bool:
        """Did ``until`` stop the run with events still to come?"""
        return self.until is not None and bool(self.heap) and self.heap.first_time() > self.until

    def _loop(self, bar) -> None:
        """``_instants`` until ``until``; under the native core compiled (rm/core/native/_simloop.pyx:
        the same steps, the completions of an instant popped and handled in C), as long as
        this class's own ``_instants``, ``complete`` and ``place`` are ``Simulation``'s."""
        until = float("inf") if self.until is None else self.until
        cls = type(self)
        if (core_name() == "native" and isinstance(self.heap, compiled("_eventheap").EventHeap)
                and cls._instants is Simulation._instants and cls.complete is Simulation.complete
                and cls.place is Simulation.place):
            compiled("_simloop").loop(self, bar, until)
        else:
            self._instants(bar, until)
        self.finished_tasks = sum(j.done for j in self.jobs.values())

    def _instants(self, bar, until: float) -> None:
        """Instant by instant, while an event is due by ``until``: every event of the
        instant, then the scheduler's round (unless the RM is down), the share rows of the
        apps that changed, and the progress bar."""
        heap = self.heap
        pop, first_time = heap.pop, heap.first_time
        schedule, complete, place = self.scheduler.schedule, self.complete, self.place
        log = self.log
        running = self.running
        changed: dict[str, _Job] = {}
        shown = 0
        while heap and first_time() <= until:
            t = first_time()
            self.now = t
            while first_time() == t:
                _, priority, payload = pop()
                if priority == COMPLETE:
                    entry = running.pop(payload, None)
                    if entry is not None:      # else the container was lost with its node
                        complete(payload, entry, t, t, changed)
                elif priority == FAULT:
                    self.faults.handle(payload, t, changed)
                elif t < self.rm_up:                # the RM is down: it learns of these when back
                    self._push(self.rm_up, priority, payload)
                elif priority == ARRIVE:
                    self._arrive(payload, t)
                elif priority == LEAVE:
                    self._leave(payload, t, changed)
                elif priority == JOIN:
                    self.join(payload, t, changed)
                elif priority == KILL:
                    self.preemption.kill(payload, t, changed)
            if t >= self.rm_up:
                placed = schedule()
                if placed:
                    place(placed, t, changed)
                if self.preemption is not None:
                    self.preemption.after_round(t)
            if changed:
                self._record_shares(t, changed)
            if bar is not None and log.started - shown >= 5000:
                bar.update(log.started - shown, t)
                shown = log.started
        if bar is not None:
            bar.update(log.started - shown, self.now)

    def complete(self, cid: int, entry: tuple, finish: float, t: float, changed: dict) -> None:
        """The attempt ``entry`` = (job, task, attempt) of container ``cid`` finished at
        ``finish`` and the RM hears of it at ``t``: the container is released then, and
        the job finishes with its last task."""
        job, task, attempt = entry
        self.scheduler.release(cid)
        self.log.end(job.app_id, task, attempt, "finished", finish, None, cid)
        job.done += 1
        changed[job.app_id] = job
        if job.done == job.num_tasks:
            self.scheduler.finish_app(job.app_id)
            self.log.app_done(job.app_id, t)
            job.durations = None    # nothing of the job runs again

    def _arrive(self, jobspec, t: float) -> None:
        app = jobspec.app
        self.log.submit(app, t)
        state, reason = self.scheduler.submit(app)
        if state is None:
            self.log.reject(app, reason, t)
            return
        drawn = jobspec.task_durations(self.seed) if self._durations is None else self._durations(jobspec, self.seed)
        job = _Job(jobspec, array("d", np.ascontiguousarray(drawn, dtype=np.float64).tobytes()))
        job.submit = t              # later than the trace's when the RM was down
        job.units = share_units(state, self.cluster)
        self.jobs[app.app_id] = job
        if app.num_tasks == 0:
            self.scheduler.finish_app(app.app_id)
            self.log.app_done(app.app_id, t)

    def place(self, containers, t: float, changed: dict) -> None:
        """Containers the scheduler placed at ``t``: pick each one's task and its completion."""
        log_start, running, jobs = self.log.start, self.running, self.jobs
        push = self.heap.push
        jitter = self.launch_jitter
        faults = self.faults if self.faults is not None and self.faults.intercepting else None
        for c in containers:
            job = jobs[c.app_id]
            changed[job.app_id] = job
            if faults is not None and faults.intercept(c, t):
                continue                    # held for a new AM attempt, or refused by a dead NM
            if job.retry:
                task, submit = job.retry.popleft()
                attempt = job.attempts[task] = job.attempts.get(task, 0) + 1
            else:
                task, submit, attempt = job.next_task, job.submit, 0
                job.next_task += 1
            cid = c.container_id
            running[cid] = (job, task, attempt)
            start = t + jitter * self._jitter.random() if jitter else t
            log_start(job.app_id, task, attempt, c.node, submit, start, None, cid)
            push(start + job.durations[task], COMPLETE, cid)

    def _leave(self, event, t: float, changed: dict) -> None:
        if self.faults is not None and self.faults.leaves(event.node, t, changed):
            self.cluster.depart([event.node])   # a crashed NM (kill-nm) left: it never comes back
            return
        index = self.cluster.node_index.get(event.node)
        if index is None or not self.cluster.nodes[index].alive:
            self.log.event("node_leave_ignored", t, node=event.node, detail="not a live node")
            return
        lost = self.scheduler.remove_node(event.node, departed=True)
        self.log.remove_node(event.node, t)
        for c in lost:
            entry = self.running.pop(c.container_id, None)
            if entry is None:               # placed, not started (rayrm.rm.sim.faults)
                self.faults.lost_unstarted(c)
                continue
            job, task, attempt = entry
            self.log.end(c.app_id, task, attempt, "lost", t, container=c.container_id,
                         detail=f"node {event.node} left")
            job.retry.append((task, t))
            self.scheduler.ask(c.app_id, 1)
        self.cluster_changed(changed)

    def join(self, event, t: float, changed: dict) -> None:
        index = self.cluster.node_index.get(event.node)
        if index is not None and self.cluster.nodes[index].alive:
            self.log.event("node_join_ignored", t, node=event.node, detail="already live")
            return
        self.scheduler.add_node(event.spec)
        self.log.add_node(event.spec, t)
        self.cluster_changed(changed)

    def cluster_changed(self, changed: dict) -> None:
        """h_i and totals moved: every live app's share units, and a share row for each."""
        for app_id, job in self.jobs.items():
            state = self.cluster.apps.get(app_id)
            if state is not None:
                job.units = share_units(state, self.cluster)
                changed[app_id] = job

    # ----- what a fault does to the run (rayrm.rm.sim.faults) -------------------------

    def crash_node(self, node: str) -> dict | None:
        """The NM of ``node`` crashed, or the RM can no longer hear it: its running attempts
        leave ``running`` (their completions are dropped) and are returned, container id ->
        (job, task, attempt); None when no live node has that name."""
        index = self.cluster.node_index.get(node)
        if index is None or not self.cluster.nodes[index].alive:
            return None
        running = self.running
        return {cid: running.pop(cid) for cid in sorted(self.cluster.nodes[index].containers) if cid in running}

    def finish_of(self, entry: tuple) -> float:
        """When the running attempt ``entry`` = (job, task, attempt) finishes: its start plus
        its task's duration (the time of its completion event)."""
        job, task, attempt = entry
        return self.log.tasks[(job.app_id, task, attempt)][5] + job.durations[task]

    def end_lost(self, cid: int, entry: tuple, t: float, changed: dict, detail: str, crashed: float,
                 release: bool = False) -> bool:
        """The attempt ``entry`` = (job, task, attempt) of container ``cid``, stopped by a crash
        at ``crashed``, ends ``lost`` at ``t`` (a jittered start after the crash moves back
        to it); ``release``: its container goes back to the scheduler too.  True when its
        job still runs: the task is then retried, and its AM asks again."""
        job, task, attempt = entry
        row = self.log.tasks[(job.app_id, task, attempt)]
        row[5] = min(row[5], crashed)
        self.log.end(job.app_id, task, attempt, "lost", t, container=cid, detail=detail)
        if release and cid in self.cluster.containers:
            self.scheduler.release(cid)
        if self.jobs.get(job.app_id) is job and job.app_id in self.cluster.apps:
            job.retry.append((task, t))
            changed[job.app_id] = job
            return True
        return False

    def fail_app(self, app: str, t: float, changed: dict, reason: str) -> None:
        """The app fails (its last attempt failed): its running attempts are killed."""
        job = self.jobs.pop(app)
        for cid in [cid for cid, entry in self.running.items() if entry[0] is job]:
            _, task, attempt = self.running.pop(cid)
            self.log.end(app, task, attempt, "killed", t, container=cid, detail="the application failed")
        self.scheduler.finish_app(app)
        self.log.app_done(app, t, status="failed")
        self.log.mark(app, "failed", reason)
        changed[app] = job

    def _record_shares(self, t: float, changed: dict) -> None:
        """One share row per app whose running count (or h_i) changed at ``t``."""
        self.log.shares_of(t, changed, self.cluster.apps)
        changed.clear()

    def _cut_short(self) -> None:
        """A run stopped by ``until``: its submitted jobs not done end as 'unfinished', as
        an interrupted replay's do; attempts still running are written as running."""
        for app_id, job in self.jobs.items():
            if job.done < job.num_tasks:
                self.log.mark(app_id, "unfinished", f"the run stopped at --until {self.until:g}")

    def _strand(self) -> None:
        """Jobs with tasks never run (their nodes left for good) end as 'unfinished'."""
        for app_id, job in self.jobs.items():
            if job.done < job.num_tasks:
                self.log.mark(app_id, "unfinished",
                              f"{job.num_tasks - job.done} task(s) never ran: no live node could take them")


class _Progress:
    """Progress on stderr: a tqdm bar on a terminal; elsewhere (a log file, a pipe) a plain
    line every ``PLAIN_EVERY`` wall seconds, so a long run shows it is alive."""

    def __init__(self, total: int, bar, stream=None):
        self.total, self.bar, self.stream = total, bar, stream or sys.stderr
        self.done = 0
        self.started = self.last = _time.monotonic()

    def update(self, n: int, now: float) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            return
        wall = _time.monotonic()
        if wall - self.last >= PLAIN_EVERY:
            self.last = wall
            share = f" ({self.done / self.total:.0%})" if self.total else ""
            print(f"rayrm simulate: {self.done:,} of {self.total:,} tasks started{share}, trace time "
                  f"{now:,.0f} s, {wall - self.started:,.0f} s elapsed", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _progress(total: int, progress: bool | None) -> _Progress | None:
    """``progress``: True always, False never, None after PROGRESS_DELAY seconds (bar) or
    PLAIN_EVERY seconds (plain lines, when stderr is not a terminal)."""
    if progress is False:
        return None
    if not sys.stderr.isatty():
        return _Progress(total, None)
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency of the CLI only
        return _Progress(total, None)
    return _Progress(total, tqdm(total=total, unit="task", file=sys.stderr,
                                 delay=0 if progress else PROGRESS_DELAY, desc="simulating",
                                 leave=False, mininterval=0.5))


def simulate(config: "ExperimentConfig", policy: str | None = None, seed: int | None = None,
             out: str | Path | None = None, progress: bool | None = None,
             launch_jitter: float = 0.0, jitter_seed: int = 0, faults=(), fmt: str | None = None,
             until: float | None = None) -> dict:
    """Simulate ``config`` under ``policy`` (default: the config's) with ``seed``.

    Streams the run directory to ``out`` when given; returns the summary (summary.json).
    ``progress``: True always shows progress on stderr, False never, None after a few seconds.
    ``launch_jitter``/``jitter_seed``: see the module docstring (0: instant starts).
    ``faults``: fault specs (``rayrm.rm.core.faults``) besides the config's own (``rayrm.rm.sim.faults``).
    ``fmt``: the run directory's format, 'csv', 'parquet' or None/'auto' (``rayrm.rm.runs.schema``).
    ``until``: stop at this trace time and write what ran, as an interrupted replay does
    (``"interrupted": true`` and the reason in the summary), so a partial replay has a twin.
    """
    started = _time.perf_counter()
    with paused_gc():    # see Simulation.run; on again once the run's objects are freed
        sim = Simulation(config, policy, seed, launch_jitter, jitter_seed, faults, out=out, fmt=fmt, until=until)
        failed = None
        try:
            log = sim.run(progress)
        except PolicyError as e:        # the run ends here; its directory says what ran and why
            log, failed = sim.log, e
            for app_id, job in log.jobs.items():
                if job["status"] == "running":
                    log.mark(app_id, "unfinished", f"the run stopped: {e}")
        wall = _time.perf_counter() - started
        extra = {"launch_jitter": launch_jitter, "jitter_seed": jitter_seed} if launch_jitter else {}
        extra["policy_source"] = policy_source(sim.policy_name)
        if failed is not None:
            extra |= {"interrupted": True, "interrupt_reason": str(failed), "policy_error": str(failed)}
        if sim.stopped_early:
            extra |= {"interrupted": True, "interrupt_reason": f"--until {until:g}"}
        if sim.faults is not None:
            extra["faults"] = sim.faults.summary()
        if sim.preemption is not None:
            extra["preemption"] = sim.preemption.summary(sim.now)
        summary = (log.write(out, wall_seconds=wall, **extra) if out is not None
                   else log.summary(wall_seconds=wall, **extra))
        del sim, log
    if failed is not None:
        raise failed
    return summary
