# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled offer: ``OnlineScheduler._offer``, the fresh-app fit test of
``OnlineScheduler.schedule``, ``_first_fitting``, ``_place`` and ``release`` with the accounting of
``ClusterState.allocate`` and ``release`` (rm/core/scheduler.py and cluster.py, the Python
reference), the walk's fit tests in C doubles.

Same operations in the same order as the reference: an app fits node m when it may use m
(``eligible[m]``) and d_r <= F_r + EPS for every dimension r, tested as ``d > F_r + EPS`` in
doubles, dimension by dimension — Python's floats are C doubles, so every comparison gives
the reference's answer.  What is not a fit test (the vector index, a best-fit policy's node,
placing a container through a subclass, serving apps asked for since a proof) is the
scheduler's own Python method, called as the reference calls it, so a subclass (the queue
tree) or a policy overriding one is obeyed.  Free vectors are updated with Python's own
arithmetic on their items (an int capacity stays an int), only compared in doubles.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.object cimport PyObject_RichCompareBool, Py_LT
from cpython.ref cimport PyObject


from rayrm.rm.core.model import EPS as _EPS, Container

cdef double EPS = _EPS
include "_fit.pxi"

MAX_WIDTH = MAX_DIMS

cdef Py_ssize_t VECTOR_FROM = 48
cdef Py_ssize_t WALK_STEPS = 8


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
            i = entry_bisect_left(order, app.entry)
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


cdef bint any_fits(list cand, Py_ssize_t m, list free) except -1:
    """``scheduler.any_fits`` over the apps of ``cand`` (sorted entries), all with a task
    pending (an entry leaves ``cand`` when its app's last one is placed)."""
    cdef double F[MAX_DIMS]
    cdef Py_ssize_t w = PyList_GET_SIZE(free), j
    load(free, F, w)
    for j in range(PyList_GET_SIZE(cand)):
        if fits(<object> PyTuple_GET_ITEM(<tuple> PyList_GET_ITEM(cand, j), 3), m, F, w):
            return True
    return False


def offer_fresh(sched, list indexes, set dirty, list cand, list placed):
    """The end of ``OnlineScheduler.schedule``: the nodes not offered yet (not ``dirty``) that
    an app asked for since the last ``schedule()`` may use, in node order, offered to those
    apps (``cand``, sorted entries) when one of them fits — most are full, and the fit test
    is cheaper than an offer that would walk the same apps and place nothing."""
    cdef list nodes = sched.cluster.nodes
    for m in indexes:
        node = <object> PyList_GET_ITEM(nodes, <Py_ssize_t> m)
        if m in dirty or not node.alive:
            continue
        if not any_fits(cand, m, node.free):
            continue
        sched._offer(node, cand, placed)
        if not cand:
            break


def place(sched, app, node, list order):
    """``OnlineScheduler._place``: one task of ``app`` on ``node`` (``ClusterState.allocate``),
    its key anew (``_set_key``, inline when ``sched._inline_key``: key = n u, inf for NaN as
    ``served_key``), its entry moved in the order or dropped with its last pending task."""
    cdef list main = sched._order
    cdef Py_ssize_t i
    cluster = sched.cluster
    # ClusterState.allocate, unless this cluster's was replaced (a test's checking wrapper)
    container = (cluster.allocate(app, node) if "allocate" in cluster.__dict__
                 else allocate(cluster, app, node))
    if order is not main:
        del order[entry_bisect_left(order, app.entry)]
    i = entry_bisect_left(main, app.entry)
    pending = app.pending - 1
    app.pending = pending
    entry = set_key(sched, app)
    if pending > 0:
        reposition(main, i, entry)
        if order is not main:
            entry_insort(order, entry)
    else:
        del main[i]
        sched._index.set_pending(app.app_id, False)
    return container


def release(sched, container_id):
    """``OnlineScheduler.release``: the container's resources back to its node
    (``ClusterState.release``), its node's proof kept on the first release since the last
    ``schedule()``, its app rekeyed (``_rekey``), the node dirty when alive."""
    cluster = sched.cluster
    if "release" in cluster.__dict__:       # replaced on this cluster: the reference path
        return release_by(sched, cluster, container_id)
    cdef dict holders = cluster.holders
    cdef Py_ssize_t i
    container = cluster.containers.pop(container_id)
    app, node = holders.pop(container_id)
    m = node.index
    dirty = sched._dirty
    if m not in dirty:
        sched._proof[m] = tuple(node.free)
    cdef set held = node.containers
    held.discard(container_id)
    cdef list free = node.free
    cdef tuple cap = node.capacity, demand = app.demand
    for i in range(PyTuple_GET_SIZE(demand)):
        # snap back to capacity on the last release so drift never accumulates
        free[i] = cap[i] if not held else free[i] + <object> PyTuple_GET_ITEM(demand, i)
    if cluster._free_matrix is not None:
        cluster._free_stale.add(m)
    app.running -= 1
    if cluster.count_per_node:
        k = app.on_node[m] - 1
        if k:
            app.on_node[m] = k
        else:
            del app.on_node[m]
    if app.pending > 0:                 # in the order: move it to its new place
        main = sched._order
        i = entry_bisect_left(main, app.entry)
        reposition(main, i, set_key(sched, app))
    else:
        set_key(sched, app)
    if node.alive:
        dirty.add(m)
    return container


cdef object allocate(cluster, app, node):
    """``ClusterState.allocate``: free -= d, a new container, the running counts."""
    cdef list free = node.free
    cdef tuple demand = app.demand
    cdef Py_ssize_t i
    for i in range(PyTuple_GET_SIZE(demand)):
        free[i] = free[i] - <object> PyTuple_GET_ITEM(demand, i)
    cid = next(cluster._next_container)
    # Container(cid, app_id, -1, node) without the named tuple's Python-level __new__
    c = tuple.__new__(Container, (cid, app.app_id, -1, node.name))
    cluster.containers[cid] = c
    cluster.holders[cid] = (app, node)
    node.containers.add(cid)
    app.running += 1
    m = node.index
    if cluster.count_per_node:
        app.on_node[m] = app.on_node.get(m, 0) + 1
    if cluster._free_matrix is not None:
        cluster._free_stale.add(m)
    return c


cdef inline object set_key(sched, app):
    """``_set_key``: the app's key and entry anew; returns the entry."""
    cdef double key
    unit = app.unit if sched._inline_key else None
    if type(unit) is float:
        key = <double> app.running * <double> unit
        k = key if key == key else float("inf")
        app.key = k
        entry = app.entry = (k, app.submit, app.app_id, app)
        return entry
    sched._set_key(app)
    return app.entry


cdef inline void reposition(list order, Py_ssize_t i, tuple entry) except *:
    """``scheduler._reposition``: ``entry`` in place of the entry at i, or re-inserted when
    it is no longer between its neighbours."""
    if ((i + 1 < PyList_GET_SIZE(order) and entry_lt(<object> PyList_GET_ITEM(order, i + 1), entry))
            or (i > 0 and entry_lt(entry, <object> PyList_GET_ITEM(order, i - 1)))):
        del order[i]
        entry_insort(order, entry)
    else:
        order[i] = entry


cdef inline bint entry_lt(object a, object b) except -1:
    """a < b for two entries (key, submit, app id, app) of the sorted order, as Python compares
    the tuples: when both keys are floats that differ (not NaN), the first items differ and
    decide, so the keys are compared in doubles; otherwise the tuples themselves."""
    cdef object ka = <object> PyTuple_GET_ITEM(a, 0)
    cdef object kb = <object> PyTuple_GET_ITEM(b, 0)
    cdef double x, y
    if type(ka) is float and type(kb) is float:
        x, y = PyFloat_AS_DOUBLE(ka), PyFloat_AS_DOUBLE(kb)
        if x < y:
            return True
        if x > y:
            return False
    return PyObject_RichCompareBool(a, b, Py_LT)


cdef Py_ssize_t entry_bisect_left(list order, object entry) except -1:
    """``bisect.bisect_left(order, entry)`` with ``entry_lt``."""
    cdef Py_ssize_t lo = 0, hi = PyList_GET_SIZE(order), mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if entry_lt(<object> PyList_GET_ITEM(order, mid), entry):
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef int entry_insort(list order, object entry) except -1:
    """``bisect.insort(order, entry)`` (after any equal entries) with ``entry_lt``."""
    cdef Py_ssize_t lo = 0, hi = PyList_GET_SIZE(order), mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if entry_lt(entry, <object> PyList_GET_ITEM(order, mid)):
            hi = mid
        else:
            lo = mid + 1
    order.insert(lo, entry)
    return 0


cdef object release_by(sched, cluster, container_id):
    """``OnlineScheduler.release`` through the cluster's own ``release``."""
    node = cluster.holders[container_id][1]
    container = cluster.containers[container_id]
    m = node.index
    if m not in sched._dirty:
        sched._proof[m] = tuple(node.free)
    app, node = cluster.release(container_id)
    sched._rekey(app)
    if node.alive:
        sched._dirty.add(m)
    return container


def first_fitting(index, Py_ssize_t m, list free):
    """``OnlineScheduler._first_fitting``: the least entry among the pending apps that may
    use node m and fit ``free`` (``PendingIndex.fits_mask``), its app, or None; the bitset is
    read one byte at a time instead of one lowest bit at a time."""
    cand = index.fits_mask(m, free)
    if not cand:
        return None
    cdef bytes raw = cand.to_bytes((cand.bit_length() + 7) // 8, "little")
    cdef const unsigned char *p = raw
    cdef Py_ssize_t nbytes = len(raw), j, b
    cdef list items = index._items
    cdef unsigned char byte
    best = None
    for j in range(nbytes):
        byte = p[j]
        b = 0
        while byte:
            if byte & 1:
                entry = (<object> PyList_GET_ITEM(items, 8 * j + b)).entry
                if best is None or entry < best:
                    best = entry
            byte >>= 1
            b += 1
    return best[3]
