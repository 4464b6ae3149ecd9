# cython: language_level=3, boundscheck=False, wraparound=False
"""The simulator's per-task steps, compiled: an instant's task completions and the start of
the containers a round placed (``Simulation._loop``'s completions with ``Simulation.complete``,
and ``Simulation.place``, in rm/sim/engine.py: the Python reference).

Statement for statement the reference's, on the same objects: what changes is that the
event heap is popped and pushed in C (``EventHeap``, _eventheap.pxd), without a (t,
priority, payload) tuple per event, and that the scheduler's compiled ``release`` and the
compiled run log's ``start`` and ``end`` are called as C-level functions when the
scheduler and the log are the plain ones (a subclass or a replaced method is called as the
reference calls it).  Every step in between — the running attempts, the job's counts, the
``changed`` apps — is the reference's own dict and attribute work.
"""

from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.ref cimport PyObject

from ._eventheap cimport EventHeap

from . import _offer, _runlog, _tree

#: Simulation's event priorities: a completion comes first at an instant
cdef long COMPLETE = 0

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


def complete_due(sim, EventHeap heap, double t, dict running, dict changed):
    """Pop the completions at ``t`` from the top of ``heap`` and handle each as ``_loop`` and
    ``Simulation.complete`` do: the attempt of a container still running (else it was lost
    with its node) ends 'finished' at ``t``, its container is released, and its job
    finishes with its last task.  Returns when the next event is not a completion at ``t``
    (completions come first at an instant, so none at ``t`` is left)."""
    sched, log = sim.scheduler, sim.log
    release = releaser(sched)
    end = _end if type(log).end is _end else None
    finish_app, app_done = sched.finish_app, log.app_done
    cdef object cid, entry, job, task, attempt, app_id
    while heap.n and heap.items[0].t == t and heap.items[0].priority == COMPLETE:
        cid = heap.pop_payload()
        entry = running.pop(cid, None)
        if entry is None:
            continue
        job = <object> PyTuple_GET_ITEM(entry, 0)
        task = <object> PyTuple_GET_ITEM(entry, 1)
        attempt = <object> PyTuple_GET_ITEM(entry, 2)
        if release is None:
            sched.release(cid)
        else:
            release(sched, cid)
        app_id = job.app_id
        if end is None:
            log.end(app_id, task, attempt, "finished", t, None, cid)
        else:
            end(log, app_id, task, attempt, "finished", t, None, cid)
        job.done += 1
        changed[app_id] = job
        if job.done == job.num_tasks:
            finish_app(app_id)
            app_done(app_id, t)
            job.durations = None    # nothing of the job runs again


def place(sim, list containers, double t, dict changed):
    """``Simulation.place``: containers the scheduler placed at ``t``; each one's task (a
    lost one asked again first, else the next never started), its start (``t``, or later
    by a launch jitter), its row in the log and its completion on the heap."""
    cdef EventHeap heap = sim.heap
    cdef dict running = sim.running, jobs = sim.jobs
    cdef double jitter = sim.launch_jitter, start
    log = sim.log
    start_row = _start if type(log).start is _start else None
    faults = sim.faults if sim.faults is not None and sim.faults.intercepting else None
    cdef object c, job, task, submit, attempt, app_id, cid
    for c in containers:
        app_id = <object> PyTuple_GET_ITEM(c, 1)         # Container(container_id, app_id, task, node)
        job = jobs[app_id]
        changed[job.app_id] = job
        if faults is not None and faults.intercept(c, t):
            continue                    # held for a new AM attempt, or refused by a dead NM
        retry = job.retry
        if retry:
            task, submit = retry.popleft()
            attempts = job.attempts
            attempt = attempts[task] = attempts.get(task, 0) + 1
        else:
            task, submit, attempt = job.next_task, job.submit, 0
            job.next_task += 1
        cid = <object> PyTuple_GET_ITEM(c, 0)
        running[cid] = (job, task, attempt)
        start = t + jitter * sim._jitter.random() if jitter else t
        if start_row is None:
            log.start(job.app_id, task, attempt, <object> PyTuple_GET_ITEM(c, 3), submit, start, None, cid)
        else:
            start_row(log, job.app_id, task, attempt, <object> PyTuple_GET_ITEM(c, 3), submit, start, None, cid)
        heap.push(start + <double> job.durations[task], COMPLETE, cid)
