# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled greedy walk of preemption's victim search on one node (``_on_node`` in
rm/core/queues/victims.py, the Python reference): the same subtractions, shares and fit
tests on C doubles, in the same order, so it takes the same containers.

A share is max_r v_r · (1/T_r) with the first of equal values kept (Python's ``max``); a
fit is d_r <= F_r + EPS for every r, tested as ``d > F_r + EPS``.  The room returned holds
the same numbers as the reference's (as floats: the caller only subtracts and compares).
"""

from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject

from rayrm.rm.core.model import EPS as _EPS

cdef double EPS = _EPS
cdef enum:
    MAX_DIMS = 64


include "_share.pxi"


cdef inline bint _fits(const double* d, const double* f, Py_ssize_t n) noexcept:
    cdef Py_ssize_t r
    for r in range(n):
        if d[r] > f[r] + EPS:
            return False
    return True


def on_node(list items, demand, list room, dict usage, dict floor, list inverse):
    """``victims._on_node`` with ``frac`` given as the resources' 1/T_r (``inverse``)."""
    cdef double R[MAX_DIMS]
    cdef double D[MAX_DIMS]
    cdef double V[MAX_DIMS]
    cdef double I[MAX_DIMS]
    cdef Py_ssize_t nr = len(room), nd = len(demand), k = len(inverse), fit_n, n, r, j, nu
    cdef PyObject* found
    if nr > MAX_DIMS or nd > MAX_DIMS or k > MAX_DIMS:
        raise ValueError("a vector wider than the compiled walk takes")
    for r in range(nr):
        R[r] = room[r]
    for r in range(nd):
        D[r] = demand[r]
    for r in range(k):
        I[r] = inverse[r]
    fit_n = nd if nd < nr else nr
    chosen = []
    if _fits(D, R, fit_n):
        return chosen, [R[r] for r in range(nr)]
    taken = {}
    for j in range(PyList_GET_SIZE(items)):
        item = <object> PyList_GET_ITEM(items, j)
        d = item[1].demand
        after = []
        for p in item[3]:
            found = PyDict_GetItem(taken, p)
            u = <object> found if found is not NULL and <object> found else usage[p]
            nu = len(u)
            n = nu if nu < len(d) else len(d)
            for r in range(n):
                V[r] = <double> u[r] - <double> d[r]
            if _frac(V, I, n if n < k else k) < <double> floor[p]:
                break
            after.append((p, [V[r] for r in range(n)]))
        else:
            taken.update(after)
            chosen.append(item)
            for r in range(len(d)):
                R[r] += <double> d[r]
            if _fits(D, R, fit_n):
                return chosen, [R[r] for r in range(nr)]
    return None


def keeps(list held, demand, list inverse):
    """``victims._sources``' test: ``all(frac(u − d) >= f for (u, f) in held)``, with
    ``frac`` given as the resources' 1/T_r (``inverse``): a container of demand d could go
    and leave every queue of ``held`` (its usage u, its floor f) at or above its floor."""
    cdef double V[MAX_DIMS]
    cdef double I[MAX_DIMS]
    cdef Py_ssize_t nd = len(demand), k = len(inverse), n, r, j
    if k > MAX_DIMS:
        raise ValueError("a vector wider than the compiled walk takes")
    for r in range(k):
        I[r] = inverse[r]
    for j in range(PyList_GET_SIZE(held)):
        pair = <tuple> PyList_GET_ITEM(held, j)
        u = pair[0]
        n = len(u)
        if nd < n:
            n = nd
        if n > MAX_DIMS:
            raise ValueError("a vector wider than the compiled walk takes")
        for r in range(n):
            V[r] = <double> u[r] - <double> demand[r]
        if not _frac(V, I, n if n < k else k) >= <double> pair[1]:
            return False
    return True
