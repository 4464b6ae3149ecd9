# cython: language_level=3, boundscheck=False, wraparound=False
"""The simulator's loop, compiled: ``Simulation._loop`` with its task completions
(``Simulation.complete``) and the start of the containers a round placed
(``Simulation.place``), in rm/sim/engine.py: the Python reference.

Statement for statement the reference's, on the same objects: what changes is that the
event heap is popped and pushed in C (``EventHeap``, _eventheap.pxd), without a (t,
priority, payload) tuple per completion, that a job's fields are read and written at
their slots' offsets (a task's duration from its array in place), that what the loop
reads at every instant (the scheduler, the log, their methods) is read once per run
(``Steps``), and that the scheduler's compiled ``release`` and ``schedule`` and the compiled run log's ``start`` and
``end`` are called as C-level functions when the scheduler and the log are the plain ones
(a subclass or a replaced method is called as the reference calls it).  Every other event
(a fault, an arrival, a node leaving or joining, a preemption kill) is the simulation's own
method, as in the reference; so is every step in between — the running attempts, the job's
counts, the ``changed`` apps.
"""

from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.ref cimport PyObject

from ._eventheap cimport EventHeap
from ._offer cimport Core, schedule_in, release_in
from ._tree cimport tree_schedule, tree_release

from . import _offer, _runlog, _tree

from cpython cimport array

include "_slots.pxi"

#: the slots of the simulator's jobs (``_Job``, rm/sim/engine.py) that the per-task steps read
#: and write, at their offsets (_slots.pxi); set by the first ``Steps``
cdef type JobT = None
cdef Py_ssize_t J_APP_ID, J_NUM_TASKS, J_SUBMIT, J_DURATIONS, J_NEXT_TASK, J_RETRY, J_DONE


cdef int job_slots() except -1:
    """``JobT`` and the offsets of its slots, read once (the engine imports this module)."""
    global JobT, J_APP_ID, J_NUM_TASKS, J_SUBMIT, J_DURATIONS, J_NEXT_TASK, J_RETRY, J_DONE
    if JobT is not None:
        return 0
    from rayrm.rm.sim.engine import _Job
    J_APP_ID, J_NUM_TASKS = slot_offset(_Job, "app_id"), slot_offset(_Job, "num_tasks")
    J_SUBMIT, J_DURATIONS = slot_offset(_Job, "submit"), slot_offset(_Job, "durations")
    J_NEXT_TASK, J_RETRY = slot_offset(_Job, "next_task"), slot_offset(_Job, "retry")
    J_DONE = slot_offset(_Job, "done")
    JobT = _Job
    return 0


cdef inline object jget(object job, Py_ssize_t offset, str name):
    """``job.<name>`` (``slot_of``: a ``_Job``'s at its offset)."""
    return slot_of(job, JobT, offset, name)


cdef inline int jset(object job, Py_ssize_t offset, str name, object value) except -1:
    """``job.<name> = value`` (``set_slot_of``)."""
    return set_slot_of(job, JobT, offset, name, value)

#: Simulation's event priorities (rm/sim/engine.py)
cdef enum:
    COMPLETE, FAULT, LEAVE, JOIN, ARRIVE, KILL, WAKE

#: a progress bar moves every this many task starts
cdef Py_ssize_t BAR_EVERY = 5000

cdef object _release = _offer.release
cdef object _start = _runlog.start
cdef object _end = _runlog.end


cdef object releaser(sched):
    """The compiled ``release`` (a function of the scheduler and a container id) when it is
    what ``sched.release`` runs: a plain ``OnlineScheduler`` or ``TreeScheduler`` under the
    native core with the cluster's own ``release``; else None (call ``sched.release``)."""
    from rayrm.rm.core.queues.scheduler import TreeScheduler
    from rayrm.rm.core.scheduler import OnlineScheduler

    if not sched._native or "release" in sched.__dict__ or "release" in sched.cluster.__dict__:
        return None
    if type(sched).release is OnlineScheduler.release:
        return _release
    if type(sched).release is TreeScheduler.release:       # a queue tree's (any kind of tree)
        return _tree.release
    return None


cdef int compiled_round(sched) except -1:
    """Which compiled round ``sched.schedule`` runs: 1, a plain ``OnlineScheduler``'s
    (``_offer.schedule_in``); 2, a ``TreeScheduler``'s (``_tree.tree_schedule``); 0, none
    (call ``sched.schedule``)."""
    from rayrm.rm.core.queues.scheduler import TreeScheduler
    from rayrm.rm.core.scheduler import OnlineScheduler

    if not sched._native or "schedule" in sched.__dict__:
        return 0
    if type(sched).schedule is OnlineScheduler.schedule:
        return 1
    if type(sched).schedule is TreeScheduler.schedule:
        return 2
    return 0


def loop(sim, bar, double until):
    """``Simulation._loop``: instant by instant, while an event is due by ``until``, every
    event of the instant (its completions first, popped and handled in C), then the
    scheduler's round (unless the RM is down), the containers it placed started, the share
    rows of the apps that changed, and the progress bar."""
    cdef Steps steps = Steps(sim)
    cdef EventHeap heap = steps.heap
    cdef dict changed = {}
    cdef double t
    cdef Py_ssize_t shown = 0
    cdef tuple event
    log, sched = steps.log, steps.sched
    schedule = sched.schedule
    cdef int kind = compiled_round(sched)
    cdef Core core = Core(sched) if kind else None
    record_shares = sim._record_shares
    preemption = sim.preemption
    while heap.n and heap.items[0].t <= until:
        t = heap.items[0].t
        sim.now = t
        while heap.n and heap.items[0].t == t:
            steps.complete_due(t, changed)
            if not (heap.n and heap.items[0].t == t):
                break
            event = heap.pop()
            dispatch(sim, steps, t, <long> event[1], event[2], changed)
        if t >= sim.rm_up:
            placed = schedule() if kind == 0 else schedule_in(core) if kind == 1 else tree_schedule(core)
            if placed:
                steps.place(placed, t, changed)
            # a round before the rules' quiet time is over is not theirs to see (after_round)
            if preemption is not None and t >= <double> preemption.quiet_until:
                preemption.after_round(t)
        if changed:
            record_shares(t, changed)
        if bar is not None and log.started - shown >= BAR_EVERY:
            bar.update(log.started - shown, t)
            shown = log.started
    if bar is not None:
        bar.update(log.started - shown, sim.now)


cdef int dispatch(sim, Steps steps, double t, long priority, payload, dict changed) except -1:
    """One event other than the completions ``complete_due`` took, as ``_loop`` handles it."""
    if priority == COMPLETE:
        entry = steps.running.pop(payload, None)
        if entry is not None:      # else the container was lost with its node
            sim.complete(payload, entry, t, t, changed)
    elif priority == FAULT:
        sim.faults.handle(payload, t, changed)
    elif t < sim.rm_up:                 # the RM is down: it learns of these when back
        sim._push(sim.rm_up, priority, payload)
    elif priority == ARRIVE:
        sim._arrive(payload, t)
    elif priority == LEAVE:
        sim._leave(payload, t, changed)
    elif priority == JOIN:
        sim.join(payload, t, changed)
    elif priority == KILL:
        sim.preemption.kill(payload, t, changed)
    return 0


cdef class Steps:
    """What the loop's per-task steps read, once per run: the simulation's heap, running
    attempts and jobs, the scheduler's and the log's methods (their compiled twins when
    they are the plain ones) and the launch jitter."""
    cdef object sim, sched, log, release, end, start, finish_app, app_done
    cdef Core core                      # the compiled release's (``_offer.release_in``), or None
    cdef bint tree                      # ... and it is a tree's (``_tree.tree_release``)
    cdef EventHeap heap
    cdef dict running, jobs
    cdef double jitter

    def __init__(self, sim):
        self.sim, self.heap, self.running, self.jobs = sim, sim.heap, sim.running, sim.jobs
        self.sched, self.log = sim.scheduler, sim.log
        self.release = releaser(self.sched)
        self.tree = self.release is _tree.release
        self.core = Core(self.sched) if self.release is _release or self.tree else None
        self.end = _end if type(self.log).end is _end else None
        self.start = _start if type(self.log).start is _start else None
        self.finish_app, self.app_done = self.sched.finish_app, self.log.app_done
        self.jitter = sim.launch_jitter
        job_slots()

    cdef int complete_due(self, double t, dict changed) except -1:
        """Pop the completions at ``t`` from the top of the heap and handle each as
        ``_loop`` and ``Simulation.complete`` do: the attempt of a container still running
        (else it was lost with its node) ends 'finished' at ``t``, its container is
        released, and its job finishes with its last task.  Returns when the next event is
        not a completion at ``t`` (completions come first at an instant, so none at ``t``
        is left)."""
        cdef EventHeap heap = self.heap
        cdef object cid, entry, job, task, attempt, app_id
        while heap.n and heap.items[0].t == t and heap.items[0].priority == COMPLETE:
            cid = heap.pop_payload()
            entry = self.running.pop(cid, None)
            if entry is None:
                continue
            job = <object> PyTuple_GET_ITEM(entry, 0)
            task = <object> PyTuple_GET_ITEM(entry, 1)
            attempt = <object> PyTuple_GET_ITEM(entry, 2)
            if self.tree:
                tree_release(self.core, cid)
            elif self.core is not None:
                release_in(self.core, cid)
            elif self.release is None:
                self.sched.release(cid)
            else:
                self.release(self.sched, cid)
            app_id = jget(job, J_APP_ID, "app_id")
            if self.end is None:
                self.log.end(app_id, task, attempt, "finished", t, None, cid)
            else:
                self.end(self.log, app_id, task, attempt, "finished", t, None, cid)
            done = jget(job, J_DONE, "done") + 1
            jset(job, J_DONE, "done", done)
            changed[app_id] = job
            if done == jget(job, J_NUM_TASKS, "num_tasks"):
                self.finish_app(app_id)
                self.app_done(app_id, t)
                jset(job, J_DURATIONS, "durations", None)   # nothing of the job runs again
        return 0

    cdef int place(self, list containers, double t, dict changed) except -1:
        """``Simulation.place``: containers the scheduler placed at ``t``; each one's task (a
        lost one asked again first, else the next never started), its start (``t``, or
        later by a launch jitter), its row in the log and its completion on the heap."""
        cdef double start, duration
        cdef Py_ssize_t k
        sim, log = self.sim, self.log
        faults = sim.faults if sim.faults is not None and sim.faults.intercepting else None
        cdef object c, job, task, submit, attempt, app_id, cid, durations
        for c in containers:
            # Container(container_id, app_id, task, node)
            job = self.jobs[<object> PyTuple_GET_ITEM(c, 1)]
            app_id = jget(job, J_APP_ID, "app_id")
            changed[app_id] = job
            if faults is not None and faults.intercept(c, t):
                continue                    # held for a new AM attempt, or refused by a dead NM
            retry = jget(job, J_RETRY, "retry")
            if retry:
                task, submit = retry.popleft()
                attempts = job.attempts
                attempt = attempts[task] = attempts.get(task, 0) + 1
            else:
                task, submit, attempt = jget(job, J_NEXT_TASK, "next_task"), jget(job, J_SUBMIT, "submit"), 0
                jset(job, J_NEXT_TASK, "next_task", task + 1)
            cid = <object> PyTuple_GET_ITEM(c, 0)
            self.running[cid] = (job, task, attempt)
            start = t + self.jitter * sim._jitter.random() if self.jitter else t
            if self.start is None:
                log.start(app_id, task, attempt, <object> PyTuple_GET_ITEM(c, 3), submit, start, None, cid)
            else:
                self.start(log, app_id, task, attempt, <object> PyTuple_GET_ITEM(c, 3), submit, start, None, cid)
            durations = jget(job, J_DURATIONS, "durations")
            k = task
            if type(durations) is array.array and 0 <= k < (<array.array> durations).ob_size:
                duration = (<array.array> durations).data.as_doubles[k]    # as _Job holds them
            else:
                duration = durations[task]
            self.heap.push(start + duration, COMPLETE, cid)
        return 0
