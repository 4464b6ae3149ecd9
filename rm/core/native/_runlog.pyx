# cython: language_level=3, boundscheck=False, wraparound=False
"""The run log's hot recording paths, compiled (docs/design.md, "Native core").

``start``, ``end`` and ``shares_at`` are ``rayrm.rm.runs.log.RunLog``'s methods of the
same names, record for record: ``NativeRunLog`` (the log under the native core) takes them
as its methods.  The Python ones are the reference; tests/test_native.py compares the run
directories of both cores byte for byte.  What differs is only how a row reaches its
``ColumnBuffer``: a float goes straight into its ``array('d')`` (grown in place, the
value unboxed once), a text or count cell onto its list, with no Python frame and no
bound-method call per cell.  Formatting and writing stay the Python writer's (one code
path, so the files cannot drift).
"""

from cpython cimport array
from libc.math cimport NAN

#: rows per batch a streaming log writes at once (rayrm.rm.runs.log.BATCH, given by the log)
cdef Py_ssize_t _batch = 200_000


def set_batch(Py_ssize_t rows):
    """The streaming batch size (``RunLog.BATCH``, set when the log module loads)."""
    global _batch
    _batch = rows


cdef inline int _put(array.array col, double x) except -1:
    """Append ``x`` to an ``array('d')`` column."""
    cdef Py_ssize_t n = col.ob_size
    array.resize_smart(col, n + 1)
    col.data.as_doubles[n] = x
    return 0


cdef inline int _event(list cols, double time, object wall, str kind, object app, object task,
                       object container, object node, object detail) except -1:
    """One event row onto the events buffer's columns (``schema.EVENTS`` order)."""
    _put(<array.array>cols[0], time)
    _put(<array.array>cols[1], NAN if wall is None else <double>wall)
    (<list>cols[2]).append(kind)
    (<list>cols[3]).append(app)
    (<list>cols[4]).append(task)
    (<list>cols[5]).append(container)
    (<list>cols[6]).append(node)
    (<list>cols[7]).append(detail)
    return 0


def start(self, app, task, attempt, node, submit, time, wall=None, container=""):
    """RunLog.start: a task attempt starts running (``submit``: when it was asked for)."""
    self.tasks[(app, task, attempt)] = [app, task, attempt, node, submit, time, None, "running"]
    self.started += 1
    job = self.jobs.get(app)
    if job is not None and job["first_start"] is None:
        job["first_start"] = time
    cdef list cols = self._events.cols
    _event(cols, time, wall, "start", app, task, container, node, "")
    if self._sinks and (<array.array>cols[0]).ob_size >= _batch:
        self._flush()


def end(self, app, task, attempt, str status, time, wall=None, container="", detail=""):
    """RunLog.end: a task attempt ends; one that ends before its recorded start never ran
    (its start becomes its end)."""
    cdef list row, t
    cdef double t_end = time, start_
    if self._sinks:
        row = self.tasks.pop((app, task, attempt))
        node = row[3]
        start_ = row[5]
        if start_ > t_end:
            start_ = t_end
        t = self._ended.cols
        (<list>t[0]).append(app)
        (<array.array>t[1]).append(task)
        (<array.array>t[2]).append(attempt)
        (<list>t[3]).append(node)
        _put(<array.array>t[4], <double>row[4])
        _put(<array.array>t[5], start_)
        _put(<array.array>t[6], t_end)
        (<list>t[7]).append(status)
    else:
        row = self.tasks[(app, task, attempt)]
        if row[5] > time:
            row[5] = time
        row[6] = time
        row[7] = status
        node = row[3]
    cdef list cols = self._events.cols
    _event(cols, t_end, wall, status, app, task, container, node, detail)
    if self._sinks and (<array.array>cols[0]).ob_size >= _batch:
        self._flush()


def shares_at(self, double time, apps):
    """RunLog.shares_at: one instant's share rows, each (app, running n, units u) for the
    shares n × u (one task's task, dominant, cpu and memory share)."""
    if self._share_pending:
        self._flush_shares()
    self._share_time = None
    cdef list s = self._shares.cols
    cdef array.array s_time = s[0], s_task = s[2], s_dom = s[3], s_cpu = s[4], s_mem = s[5], s_run = s[6]
    cdef list s_app = s[1]
    for app, n, u in apps:
        _put(s_time, time)
        s_app.append(app)
        _put(s_task, n * u[0])
        _put(s_dom, n * u[1])
        _put(s_cpu, n * u[2])
        _put(s_mem, n * u[3])
        _put(s_run, n)
    if self._sinks and s_time.ob_size >= _batch:
        self._flush()
