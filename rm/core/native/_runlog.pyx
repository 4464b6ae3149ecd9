# cython: language_level=3, boundscheck=False, wraparound=False
"""The run log's hot recording paths, compiled (docs/design.md, "Native core").

``start``, ``end``, ``shares_at`` and ``shares_of`` are ``rayrm.rm.runs.log.RunLog``'s
methods of the same names, record for record: ``NativeRunLog`` (the log under the native
core) takes them as its methods.  The Python ones are the reference; tests/test_native.py
compares the run directories of both cores byte for byte.  What differs is only how a row
reaches its ``ColumnBuffer``: a float goes straight into its ``array('d')`` (grown in
place, the value unboxed once), a text or count cell onto its list, with no Python frame
and no bound-method call per cell.

A streaming log's events and shares hold their text cells in ``TextColumn``s: each cell's
UTF-8 bytes go onto one buffer as it comes, as an Arrow string array lays them out, so a
batch becomes its Arrow column without a Python object per cell, and a count (a task
number, a container id) is written as its decimal text without a ``str`` made for it.

``csv_lines`` formats a batch of a table's columns as its CSV lines in C, without the GIL
once the cells' bytes are located, byte for byte what ``rayrm.rm.runs.encoding.csv_text``
(pyarrow) writes for them; it gives up (None) on what it does not spell the same
(module end).
"""

from cpython cimport array
from cpython.bytearray cimport (PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE,
                                PyByteArray_Resize)
from libc.math cimport NAN, fabs, floor, isnan, rint, signbit
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

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
        cdef char *digits = buf
        if v < 0:
            buf[0] = 45                 # '-'
            digits += 1
        cdef char *end = _digits(digits, <unsigned long long> (-v) if v < 0 else <unsigned long long> v)
        return self.put_utf8(buf, end - buf)

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


def shares_of(self, double time, dict changed, dict apps):
    """RunLog.shares_of: ``shares_at`` for the apps of ``changed`` (app -> its job and its
    ``units``), each running what its state in ``apps`` runs (0 once it has left them)."""
    if self._share_pending:
        self._flush_shares()
    self._share_time = None
    cdef list s = self._shares.cols
    cdef array.array s_time = s[0], s_task = s[2], s_dom = s[3], s_cpu = s[4], s_mem = s[5], s_run = s[6]
    cdef tuple u
    cdef double n
    s_app = s[1]
    for app, job in changed.items():
        state = apps.get(app)
        n = state.running if state is not None else 0     # an int: exact as a double
        u = job.units
        _put(s_time, time)
        _text(s_app, app)
        _put(s_task, n * <double>u[0])
        _put(s_dom, n * <double>u[1])
        _put(s_cpu, n * <double>u[2])
        _put(s_mem, n * <double>u[3])
        _put(s_run, n)
    if self._sinks and s_time.ob_size >= _batch:
        self._flush()


# ----- a batch's CSV lines ---------------------------------------------------------------

cdef enum Kind:
    ROUNDED_FLOAT           # a float written to 6 decimals
    COUNT_FLOAT             # a float holding a count
    INT
    TEXT_BYTES              # a TextColumn: its cells' bytes end to end and their ends
    TEXT_CELLS              # a list: one (pointer, size) per cell

#: 10^6 × the floats written without giving up: below it, a float to 6 decimals, k / 10^6
#: with |k| < 10^15, has at most 15 significant digits, so the shortest decimal that reads
#: back as it is k's own digits (two decimals of 15 digits never round to one double), and
#: pyarrow writes it without an exponent (as it does up to 10^10)
cdef double _SCALED_BELOW = 1e15


cdef struct Column:
    Kind kind
    const double *floats
    const long long *ints
    const char *data
    const long long *ends
    const char **cells
    Py_ssize_t *sizes


cdef inline char *_digits(char *out, unsigned long long u) noexcept nogil:
    """The decimal digits of ``u`` at ``out``; returns the end."""
    cdef char buf[20]
    cdef int i = 20
    while True:
        i -= 1
        buf[i] = <char> (48 + u % 10)
        u //= 10
        if not u:
            break
    memcpy(out, buf + i, 20 - i)
    return out + 20 - i


cdef inline char *_float_cell(char *out, double v, bint rounded) noexcept nogil:
    """A float cell as pyarrow writes the value (to 6 decimals when ``rounded``, as
    ``np.round(v, 6)`` does: rint(v × 10^6) / 10^6): NaN empty, else the shortest decimal
    that reads back as it, with no trailing zeros and no exponent ('-0' for −0).  NULL to
    give up: a value of 10^9 or more, or a count that is not whole."""
    cdef double k
    cdef unsigned long long u, frac
    cdef int width, i
    if isnan(v):
        return out
    if rounded:
        k = rint(v * 1e6)
    elif floor(v) == v:
        k = v * 1e6                     # exact: a whole number below 10^9 times 10^6
    else:
        return NULL
    if not fabs(k) < _SCALED_BELOW:
        return NULL
    if signbit(k):
        out[0] = 45                     # '-'
        out += 1
    u = <unsigned long long> fabs(k)
    out = _digits(out, u // 1000000)
    frac = u % 1000000
    if frac:
        width = 6
        while frac % 10 == 0:
            frac //= 10
            width -= 1
        out[0] = 46                     # '.'
        for i in range(width, 0, -1):   # the digits after the point, leading zeros included
            out[i] = <char> (48 + frac % 10)
            frac //= 10
        out += 1 + width
    return out


cdef inline char *_int_cell(char *out, long long v) noexcept nogil:
    if v < 0:
        out[0] = 45
        return _digits(out + 1, <unsigned long long> 0 - <unsigned long long> v)
    return _digits(out, <unsigned long long> v)


cdef inline bint _plain(const char *text, Py_ssize_t size) noexcept nogil:
    """No comma, quote or line break: the cell is written as it is (pyarrow refuses to write
    one that is not, unquoted)."""
    cdef Py_ssize_t i
    cdef char c
    for i in range(size):
        c = text[i]
        if c == 44 or c == 34 or c == 10 or c == 13:
            return False
    return True


cdef Py_ssize_t _fill(char *out, const Column *cols, int width, Py_ssize_t rows) noexcept nogil:
    """Write ``rows`` lines of the columns at ``out``; their size, or −1 to give up."""
    cdef char *at = out
    cdef Py_ssize_t r, size
    cdef int j
    cdef const Column *c
    for r in range(rows):
        for j in range(width):
            c = &cols[j]
            if j:
                at[0] = 44              # ','
                at += 1
            if c.kind == ROUNDED_FLOAT or c.kind == COUNT_FLOAT:
                at = _float_cell(at, c.floats[r], c.kind == ROUNDED_FLOAT)
                if at == NULL:
                    return -1
            elif c.kind == INT:
                at = _int_cell(at, c.ints[r])
            elif c.kind == TEXT_BYTES:
                size = c.ends[r + 1] - c.ends[r]
                memcpy(at, c.data + c.ends[r], size)
                at += size
            else:
                memcpy(at, c.cells[r], c.sizes[r])
                at += c.sizes[r]
        at[0] = 13                      # '\r\n'
        at[1] = 10
        at += 2
    return at - out


cdef int _locate(Column *col, list cells, list keep, Py_ssize_t rows) except -1:
    """Point ``col`` at a list column's cells' UTF-8 bytes: a str as it is, None as '',
    anything else as ``str`` of it (held in ``keep`` meanwhile), as ``encoding`` writes a
    list column."""
    cdef Py_ssize_t i
    cdef const char *text
    col.kind = TEXT_CELLS
    col.cells = <const char **> malloc(rows * sizeof(char *) + 1)
    col.sizes = <Py_ssize_t *> malloc(rows * sizeof(Py_ssize_t) + 1)
    if col.cells == NULL or col.sizes == NULL:
        raise MemoryError()
    for i in range(rows):
        v = cells[i]
        if v is None:
            v = ""
        elif type(v) is not str:
            v = str(v)
            keep.append(v)
        text = PyUnicode_AsUTF8AndSize(v, &col.sizes[i])
        col.cells[i] = text
    return 0


def csv_lines(list cols, str kinds):
    """A batch's CSV lines (``\\r\\n`` after each, no header) from its columns, in file
    order, and their kinds, one letter each: 'r' a float to 6 decimals, 'f' a float holding
    a count (both ``array('d')``, NaN empty), 'i' an ``array('q')``, 's' text (a list or a
    ``TextColumn``).  The bytes of ``csv_text`` over ``csv_table``; None where those could
    differ — a text cell with a comma, quote or line break (the caller quotes it in Python),
    a float from 10^9 up or a count that is not whole (pyarrow writes those).
    """
    cdef Py_ssize_t rows = len(cols[0]), bound, size = 0, i
    cdef int width = len(cols), j
    cdef Column *c
    cdef Column *layout = <Column *> malloc(width * sizeof(Column))
    cdef list keep = []
    cdef bytearray out
    cdef char *at
    cdef bint plain = True
    if layout == NULL:
        raise MemoryError()
    memset(layout, 0, width * sizeof(Column))
    bound = rows * (width + 1)              # the commas and line ends
    try:
        for j in range(width):
            c = &layout[j]
            col = cols[j]
            if kinds[j] == "s" and type(col) is TextColumn:
                c.kind = TEXT_BYTES
                c.data = PyByteArray_AS_STRING((<TextColumn> col).data)
                c.ends = (<TextColumn> col).ends.data.as_longlongs
                bound += PyByteArray_GET_SIZE((<TextColumn> col).data)
            elif kinds[j] == "s":
                _locate(c, col, keep, rows)
                for i in range(rows):
                    bound += c.sizes[i]
            else:
                c.kind = ROUNDED_FLOAT if kinds[j] == "r" else COUNT_FLOAT if kinds[j] == "f" else INT
                if kinds[j] == "i":
                    c.ints = (<array.array> col).data.as_longlongs
                else:
                    c.floats = (<array.array> col).data.as_doubles
                bound += 24 * rows          # a sign and 20 digits, or 9 + '.' + 6
        out = PyByteArray_FromStringAndSize(NULL, bound)
        at = PyByteArray_AS_STRING(out)
        with nogil:
            for j in range(width):
                c = &layout[j]
                if c.kind == TEXT_BYTES:
                    plain = plain and _plain(c.data, c.ends[rows])
                elif c.kind == TEXT_CELLS:
                    for i in range(rows):
                        plain = plain and _plain(c.cells[i], c.sizes[i])
            if plain:
                size = _fill(at, layout, width, rows)
        if not plain or size < 0:
            return None
        PyByteArray_Resize(out, size)
        return out
    finally:
        for j in range(width):
            free(layout[j].cells)
            free(layout[j].sizes)
        free(layout)
