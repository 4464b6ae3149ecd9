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

A streaming log's events and shares hold their text cells in ``TextColumn``s: each cell's
UTF-8 bytes go onto one buffer as it comes, as an Arrow string array lays them out, so a
batch becomes its Arrow column without a Python object per cell, and a count (a task
number, a container id) is written as its decimal text without a ``str`` made for it.
"""

from cpython cimport array
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from libc.math cimport NAN
from libc.string cimport memcpy

#: rows per batch a streaming log writes at once (rayrm.rm.runs.log.BATCH, given by the log)
cdef Py_ssize_t _batch = 200_000


def set_batch(Py_ssize_t rows):
    """The streaming batch size (``RunLog.BATCH``, set when the log module loads)."""
    global _batch
    _batch = rows


cdef inline int _put_q(array.array col, long long x) except -1:
    """Append ``x`` to an ``array('q')`` column."""
    cdef Py_ssize_t n = col.ob_size
    array.resize_smart(col, n + 1)
    col.data.as_longlongs[n] = x
    return 0


cdef inline int _put(array.array col, double x) except -1:
    """Append ``x`` to an ``array('d')`` column."""
    cdef Py_ssize_t n = col.ob_size
    array.resize_smart(col, n + 1)
    col.data.as_doubles[n] = x
    return 0


cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL
    long long PyLong_AsLongLongAndOverflow(object n, int *overflow) except? -1


cdef class TextColumn:
    """A text column as Arrow holds one: the cells' UTF-8 bytes end to end and, per cell,
    the offset where it ends.  A cell is ``str(v)`` of the value appended, '' for None:
    what ``rayrm.rm.runs.encoding`` writes for a list column of the same values."""

    cdef bytearray data
    cdef array.array ends           # array('q'): ends[0] = 0, ends[i + 1] where cell i ends

    def __cinit__(self):
        self.data = bytearray()
        self.ends = array.array("q", [0])

    cdef inline int put_utf8(self, const char *text, Py_ssize_t size) except -1:
        cdef Py_ssize_t n = PyByteArray_GET_SIZE(self.data)
        cdef Py_ssize_t k = self.ends.ob_size
        if size:
            PyByteArray_Resize(self.data, n + size)
            memcpy(PyByteArray_AS_STRING(self.data) + n, text, size)
        array.resize_smart(self.ends, k + 1)
        self.ends.data.as_longlongs[k] = n + size
        return 0

    cdef inline int put_int(self, long long v) except -1:
        """The decimal text of ``v``, as ``str`` writes an int."""
        cdef char buf[24]
        cdef Py_ssize_t i = 24
        cdef unsigned long long u = <unsigned long long> (-v) if v < 0 else <unsigned long long> v
        while True:
            i -= 1
            buf[i] = <char> (48 + u % 10)
            u //= 10
            if not u:
                break
        if v < 0:
            i -= 1
            buf[i] = 45                 # '-'
        return self.put_utf8(buf + i, 24 - i)

    cdef int put(self, object v) except -1:
        """Append the cell of ``v``: a str as it is, None as '', anything else as ``str(v)``."""
        cdef Py_ssize_t size
        cdef const char *text
        cdef int overflow = 0
        cdef long long n
        cdef str cell
        if type(v) is str:
            text = PyUnicode_AsUTF8AndSize(v, &size)
            return self.put_utf8(text, size)
        if v is None:
            return self.put_utf8(NULL, 0)
        if type(v) is int:
            n = PyLong_AsLongLongAndOverflow(v, &overflow)
            if not overflow:
                return self.put_int(n)
        cell = str(v)                   # held while its bytes are copied
        text = PyUnicode_AsUTF8AndSize(cell, &size)
        return self.put_utf8(text, size)

    def append(self, v) -> None:
        self.put(v)

    def __len__(self):
        return self.ends.ob_size - 1

    def __iter__(self):
        cdef Py_ssize_t i
        cdef const long long *ends = self.ends.data.as_longlongs
        cdef bytes raw = bytes(self.data)
        for i in range(self.ends.ob_size - 1):
            yield raw[ends[i]:ends[i + 1]].decode()

    def arrow(self):
        """The column as a pyarrow string array (utf8, no nulls)."""
        import numpy as np
        import pyarrow as pa

        if PyByteArray_GET_SIZE(self.data) >= 2 ** 31:     # beyond int32 offsets: pyarrow chunks it
            return pa.array(list(self), pa.string())
        offsets = np.frombuffer(self.ends, dtype=np.int64).astype(np.int32)
        return pa.Array.from_buffers(pa.string(), len(self), [None, pa.py_buffer(offsets),
                                                               pa.py_buffer(self.data)])


cdef inline int _text(object col, object v) except -1:
    """Append ``v`` to a text column: a ``TextColumn`` (a streaming log's) or a list."""
    if type(col) is TextColumn:
        return (<TextColumn> col).put(v)
    (<list> col).append(v)
    return 0


cdef inline int _event(list cols, double time, object wall, str kind, object app, object task,
                       object container, object node, object detail) except -1:
    """One event row onto the events buffer's columns (``schema.EVENTS`` order)."""
    _put(<array.array>cols[0], time)
    _put(<array.array>cols[1], NAN if wall is None else <double>wall)
    _text(cols[2], kind)
    _text(cols[3], app)
    _text(cols[4], task)
    _text(cols[5], container)
    _text(cols[6], node)
    _text(cols[7], detail)
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
        _put_q(<array.array>t[1], task)
        _put_q(<array.array>t[2], attempt)
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
    s_app = s[1]
    for app, n, u in apps:
        _put(s_time, time)
        _text(s_app, app)
        _put(s_task, n * u[0])
        _put(s_dom, n * u[1])
        _put(s_cpu, n * u[2])
        _put(s_mem, n * u[3])
        _put(s_run, n)
    if self._sinks and s_time.ob_size >= _batch:
        self._flush()
