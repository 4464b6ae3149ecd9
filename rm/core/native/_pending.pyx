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

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE

cdef extern from "Python.h":
    object _PyLong_FromByteArray(const unsigned char* data, size_t n, int little_endian, int is_signed)

from rayrm.rm.core.model import EPS as _EPS

cdef double EPS = _EPS


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
    ones that may use ``node`` (the node's row re-read when stale and asked)."""
    cdef bytearray stale
    cdef Py_ssize_t k
    cand = index._pending
    for dim, f in zip(index._dims, free):
        if not cand:
            return 0
        k = _at_most(dim.values, <double> f + EPS)
        cand &= (<list> dim.prefix)[k - 1] if k else 0
    if not cand:
        return 0
    cdef unsigned char[:, ::1] bits
    stale = index._stale_flags
    if stale[node]:
        bits = index._bits          # the row's bytes read straight into an int, little-endian
        index._elig[node] = _PyLong_FromByteArray(&bits[node, 0], bits.shape[1], 1, 0)
        stale[node] = 0
    return cand & (<list> index._elig)[node]


def or_from(list prefix, Py_ssize_t k, bit):
    """prefix[j] |= bit for every j >= k (``_Dimension.add``'s loop: a new slot joins the
    prefix unions of every value at or above its demand)."""
    cdef Py_ssize_t j
    for j in range(k, len(prefix)):
        prefix[j] = prefix[j] | bit
