# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled offer: ``OnlineScheduler._offer`` and the fresh-app fit test of
``OnlineScheduler.schedule`` (rm/core/scheduler.py, the Python reference) with the walk's fit
tests in C doubles.

Same operations in the same order as the reference: an app fits node m when it may use m
(``eligible[m]``) and d_r <= F_r + EPS for every dimension r, tested as ``d > F_r + EPS`` in
doubles, dimension by dimension — Python's floats are C doubles, so every comparison gives
the reference's answer.  What is not a fit test (the vector index, a best-fit policy's node,
placing a container, serving apps asked for since a proof) is the scheduler's own Python
method, called as the reference calls it, so a subclass (the queue tree) or a policy
overriding one is obeyed.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.ref cimport PyObject

from bisect import bisect_left

from rayrm.rm.core.model import EPS as _EPS

cdef double EPS = _EPS
#: the widest vector walked in C; a wider one (never met: real plus virtual dimensions)
#: takes the Python reference
cdef enum:
    MAX_DIMS = 64
MAX_WIDTH = MAX_DIMS

cdef Py_ssize_t VECTOR_FROM = 48
cdef Py_ssize_t WALK_STEPS = 8


cdef inline void load(list free, double *F, Py_ssize_t w):
    cdef Py_ssize_t r
    for r in range(w):
        F[r] = <double> (<object> PyList_GET_ITEM(free, r))


cdef inline bint fits(object app, Py_ssize_t m, double *F, Py_ssize_t w) except -1:
    """The app may use node m and its task fits F: eligible[m] and no d_r > F_r + EPS."""
    cdef object elig = app.eligible
    cdef tuple demand
    cdef Py_ssize_t r, nd
    if type(elig) is bytes and m < PyBytes_GET_SIZE(elig):
        if not PyBytes_AS_STRING(elig)[m]:
            return False
    elif not elig[m]:
        return False
    demand = app.demand
    nd = PyTuple_GET_SIZE(demand)
    if nd > w:
        nd = w
    for r in range(nd):
        if <double> (<object> PyTuple_GET_ITEM(demand, r)) > F[r] + EPS:
            return False
    return True


def offer(sched, node, list order, list placed, proof=None):
    """``OnlineScheduler._offer`` for keys that do not depend on the node (not per-node):
    serve ``node`` to the apps of ``order`` until no eligible app fits (the reference's
    docstring gives the walk and its two shortcuts)."""
    cdef double F[MAX_DIMS]
    cdef list free = node.free
    cdef Py_ssize_t w = PyList_GET_SIZE(free)
    cdef Py_ssize_t m = node.index
    cdef Py_ssize_t i = 0, n, stop, k
    cdef bint best_fit = sched._best_fit
    cdef bint vector = order is sched._order and PyList_GET_SIZE(order) >= VECTOR_FROM
    cdef bint under
    cdef object app, a
    load(free, F, w)
    while True:
        app = None
        n = PyList_GET_SIZE(order)
        stop = min(n, i + WALK_STEPS) if vector else n
        while i < stop:
            a = <object> PyTuple_GET_ITEM(<tuple> PyList_GET_ITEM(order, i), 3)
            if fits(a, m, F, w):
                app = a
                break
            i += 1
        if app is None:
            if i >= n:
                return
            app = sched._first_fitting(m, free)
            if app is None:
                return
            i = bisect_left(order, app.entry)
        target = sched._choose_node(app, node) if best_fit else node
        placed.append(sched._place(app, target, order))
        load(free, F, w)
        if proof is not None:
            under = True
            for k in range(w):
                if F[k] > <double> proof[k]:
                    under = False
                    break
            if under:
                if sched._new:
                    sched._serve_new(node, placed)
                return


def any_fits(list cand, Py_ssize_t m, list free):
    """Does an app of ``cand`` (sorted entries) that may use node m fit ``free``?"""
    cdef double F[MAX_DIMS]
    cdef Py_ssize_t w = PyList_GET_SIZE(free), j
    load(free, F, w)
    for j in range(PyList_GET_SIZE(cand)):
        if fits(<object> PyTuple_GET_ITEM(<tuple> PyList_GET_ITEM(cand, j), 3), m, F, w):
            return True
    return False
