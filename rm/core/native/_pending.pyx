# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled pieces of the pending index (rm/core/pending.py, the Python reference):
``PendingIndex._set_bits``'s two numpy fancy-index writes — an app's bit in its column of
every eligible node's row, and those rows' stale flags — as one loop over its eligibility
bytes; ``_Dimension.add``'s loop of ORs into the prefix unions (``or_from``); and
``fits_mask`` (``PendingIndex._mask``), its bisections on C doubles (the queue tree asks it
at every offer).

An unconstrained app is eligible on every node, so on a 1,000-node cluster each arrival
writes 1,000 rows twice; numpy's fancy indexing pays more per element than the loop.
"""

from cpython.buffer cimport PyBUF_ND, PyBuffer_Release, PyObject_GetBuffer
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE

cdef extern from "Python.h":
    object _PyLong_FromByteArray(const unsigned char* data, size_t n, int little_endian, int is_signed)

from rayrm.rm.core.model import EPS as _EPS
from rayrm.rm.core.pending import _Dimension

cdef double EPS = _EPS

include "_slots.pxi"

cdef type DT = _Dimension
cdef Py_ssize_t D_VALUES = slot_offset(DT, "values"), D_PREFIX = slot_offset(DT, "prefix")


def set_bits(unsigned char[:, ::1] bits, unsigned char[::1] stale, Py_ssize_t column,
             unsigned char bit, const unsigned char[::1] eligible, bint on):
    """bits[m, column] |= bit (``on``) or &= ~bit, and stale[m] = 1, for every node m with
    eligible[m] != 0 (the reference reads those nodes with ``np.flatnonzero``)."""
    cdef Py_ssize_t m
    cdef unsigned char clear = ~bit
    for m in range(eligible.shape[0]):
        if eligible[m]:
            if on:
                bits[m, column] |= bit
            else:
                bits[m, column] &= clear
            stale[m] = 1


cdef Py_ssize_t _at_most(list values, double x) except -1:
    """bisect_right(values, x): the values <= x, compared as Python compares them."""
    cdef Py_ssize_t lo = 0, hi = PyList_GET_SIZE(values), mid
    while lo < hi:
        mid = (lo + hi) // 2
        if x < <double> (<object> PyList_GET_ITEM(values, mid)):
            hi = mid
        else:
            lo = mid + 1
    return lo


def fits_mask(index, Py_ssize_t node, free):
    """``PendingIndex._mask``: the pending apps whose task fits ``free`` and, of those, the
    ones that may use ``node`` (the node's row re-read when stale and asked).  It is asked
    at every offer: the dimensions' lists are read at their slots, the row through the
    buffer protocol, not through Python's attribute and memoryview machinery."""
    cdef list dims = index._dims
    cdef Py_ssize_t k, r, w = min(PyList_GET_SIZE(dims), len(free))
    cdef Py_buffer view
    cand = index._pending
    for r in range(w):
        if not cand:
            return 0
        dim = <object> PyList_GET_ITEM(dims, r)
        k = _at_most(<list> get_slot(dim, D_VALUES, "values"), <double> free[r] + EPS)
        if not k:
            return 0
        cand &= <object> PyList_GET_ITEM(<list> get_slot(dim, D_PREFIX, "prefix"), k - 1)
    if not cand:
        return 0
    cdef bytearray stale = index._stale_flags
    cdef list elig = index._elig
    if stale[node]:
        # the row's bytes read straight into an int, little-endian
        PyObject_GetBuffer(index._bits, &view, PyBUF_ND)
        try:
            if view.ndim != 2 or not 0 <= node < view.shape[0]:
                raise ValueError("the pending index's rows are not a (nodes, bytes) array")
            elig[node] = _PyLong_FromByteArray(<unsigned char *> view.buf + node * view.shape[1],
                                               view.shape[1], 1, 0)
        finally:
            PyBuffer_Release(&view)
        stale[node] = 0
    return cand & <object> PyList_GET_ITEM(elig, node)


def or_from(list prefix, Py_ssize_t k, bit):
    """prefix[j] |= bit for every j >= k (``_Dimension.add``'s loop: a new slot joins the
    prefix unions of every value at or above its demand)."""
    cdef Py_ssize_t j
    for j in range(k, len(prefix)):
        prefix[j] = prefix[j] | bit
