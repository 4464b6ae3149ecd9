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
from cpython.mem cimport PyMem_Malloc, PyMem_Free


from rayrm.rm.core.cluster import AppState as _AppState, NodeState as _NodeState
from rayrm.rm.core.model import EPS as _EPS, Container

include "_slots.pxi"

#: the accounting's slots, read and written at their offsets (_slots.pxi)
cdef type AppT = _AppState, NodeT = _NodeState
cdef Py_ssize_t A_ELIGIBLE = slot_offset(AppT, "eligible"), A_DEMAND = slot_offset(AppT, "demand")
cdef Py_ssize_t A_ENTRY = slot_offset(AppT, "entry"), A_PENDING = slot_offset(AppT, "pending")
cdef Py_ssize_t A_RUNNING = slot_offset(AppT, "running"), A_UNIT = slot_offset(AppT, "unit")
cdef Py_ssize_t A_SUBMIT = slot_offset(AppT, "submit"), A_APP_ID = slot_offset(AppT, "app_id")
cdef Py_ssize_t A_ON_NODE = slot_offset(AppT, "on_node"), A_KEY = slot_offset(AppT, "key")
cdef Py_ssize_t N_FREE = slot_offset(NodeT, "free"), N_INDEX = slot_offset(NodeT, "index")
cdef Py_ssize_t N_ALIVE = slot_offset(NodeT, "alive"), N_NAME = slot_offset(NodeT, "name")
cdef Py_ssize_t N_CONTAINERS = slot_offset(NodeT, "containers"), N_CAPACITY = slot_offset(NodeT, "capacity")


cdef inline object aget(object app, Py_ssize_t offset, str name):
    """``app.<name>`` (``slot_of``: an ``AppState``'s at its offset)."""
    return slot_of(app, AppT, offset, name)


cdef inline int aset(object app, Py_ssize_t offset, str name, object value) except -1:
    """``app.<name> = value`` (``set_slot_of``)."""
    return set_slot_of(app, AppT, offset, name, value)


cdef inline object nget(object node, Py_ssize_t offset, str name):
    """``node.<name>`` (``slot_of``: a ``NodeState``'s at its offset)."""
    return slot_of(node, NodeT, offset, name)

cdef double EPS = _EPS
include "_fit.pxi"

MAX_WIDTH = MAX_DIMS

cdef Py_ssize_t VECTOR_FROM = 48
cdef Py_ssize_t WALK_STEPS = 8


cdef inline bint app_fits(object app, Py_ssize_t m, double *F, Py_ssize_t w) except -1:
    """``fits`` (_fit.pxi), the app's eligibility and demand read at their slots' offsets."""
    return fits_vectors(aget(app, A_ELIGIBLE, "eligible"), aget(app, A_DEMAND, "demand"), m, F, w)


cdef class Core:
    """What the offer reads of a scheduler and its cluster that stays the same for their
    life (the containers' dicts, the container ids, the pending index, how keys are made,
    whether its offers may call this module's functions directly: ``plain``), read once: for
    a whole simulation by the compiled loop (_simloop.pyx), else per call."""

    def __init__(self, sched):
        cluster = sched.cluster
        self.sched, self.cluster, self.index = sched, cluster, sched._index
        self.containers, self.holders, self.counter = cluster.containers, cluster.holders, cluster._next_container
        self.count_per_node = cluster.count_per_node
        self.inline_key, self.best_fit = sched._inline_key, sched._best_fit
        # ClusterState's own allocate and release, unless replaced on this cluster (a test's
        # checking wrapper): then the reference's path calls them
        self.own_allocate = "allocate" not in cluster.__dict__
        self.own_release = "release" not in cluster.__dict__
        self.direct = plain(sched)


def schedule(sched):
    """``OnlineScheduler.schedule`` (``schedule_in``)."""
    return schedule_in(Core(sched))


cdef list schedule_in(Core core):
    """``OnlineScheduler.schedule``: the dirty nodes offered to every pending app, in node
    order, then the nodes an app asked for since may use offered to those apps (the
    reference's docstrings give the invariant).  For a plain ``OnlineScheduler`` (not per-node,
    ``_offer``, ``_first_fitting`` and ``_place`` its own) the walk, the index's answer and
    the placement are this module's C functions; else the scheduler's methods, called as the
    reference calls them."""
    cdef list placed = []
    sched = core.sched
    dirty, fresh = sched._dirty, sched._fresh
    if not dirty and not fresh:
        return placed
    proofs = sched._proof
    sched._dirty, sched._fresh, sched._proof = set(), {}, {}
    cdef list nodes = core.cluster.nodes
    cdef bint direct = core.direct
    if fresh:
        sched._new = [a for a in fresh.values() if aget(a, A_PENDING, "pending") > 0]
    ordered = sorted(dirty)
    if core.best_fit:
        sched._round_fresh, sched._round_nodes = fresh, ordered
        sched.policy.new_round()
    cdef list order = sched._order
    if order:
        offer_method = None if direct else sched._offer
        for m in ordered:
            node = <object> PyList_GET_ITEM(nodes, <Py_ssize_t> m)
            if nget(node, N_ALIVE, "alive"):
                proof = proofs.get(m) if proofs else None
                if direct:
                    offer_walk(core, node, order, placed, proof, True)
                else:
                    offer_method(node, order, placed, proof)
                if not order:
                    break
    new = sched._new
    if new:
        fresh_apps = [a for a in new if aget(a, A_PENDING, "pending") > 0]
        sched._new = []
        if fresh_apps:
            cand = sorted([aget(a, A_ENTRY, "entry") for a in fresh_apps])
            offer_fresh(core, nodes, <set> dirty, cand, placed, direct)
    sched.placements += PyList_GET_SIZE(placed)
    return placed


cdef object _Plain = None


cdef bint plain(sched) except -1:
    """``sched`` is an ``OnlineScheduler`` itself, not per-node, with its own ``_offer``,
    ``_first_fitting`` and ``_place`` (none replaced on the instance): its offers may call
    this module's functions for them directly."""
    global _Plain
    if _Plain is None:
        from rayrm.rm.core.scheduler import OnlineScheduler
        _Plain = OnlineScheduler
    if type(sched) is not _Plain or sched._per_node:
        return False
    d = sched.__dict__
    return not ("_offer" in d or "_first_fitting" in d or "_place" in d)


def offer(sched, node, list order, list placed, proof=None):
    """``OnlineScheduler._offer`` for keys that do not depend on the node (not per-node)."""
    offer_walk(Core(sched), node, order, placed, proof, False)


cdef int offer_walk(Core core, node, list order, list placed, object proof, bint direct) except -1:
    """Serve ``node`` to the apps of ``order`` until no eligible app fits (the reference's
    docstring gives the walk and its two shortcuts); ``direct``: the index's answer and the
    placement are this module's (``plain``)."""
    cdef double F[MAX_DIMS]
    cdef list free = nget(node, N_FREE, "free")
    cdef Py_ssize_t w = PyList_GET_SIZE(free)
    cdef Py_ssize_t m = nget(node, N_INDEX, "index")
    cdef Py_ssize_t i = 0, n, stop, k
    cdef bint best_fit = core.best_fit
    sched = core.sched
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
            if app_fits(a, m, F, w):
                app = a
                break
            i += 1
        if app is None:
            if i >= n:
                return 0
            app = first_fitting_c(core.index, m, free) if direct else sched._first_fitting(m, free)
            if app is None:
                return 0
            i = entry_bisect_left(order, aget(app, A_ENTRY, "entry"))
        target = sched._choose_node(app, node) if best_fit else node
        placed.append(place_in(core, app, target, order) if direct else sched._place(app, target, order))
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
                return 0


cdef int offer_fresh(Core core, list nodes, set dirty, list cand, list placed, bint direct) except -1:
    """The end of ``OnlineScheduler.schedule``: in node order, the nodes not offered yet (not
    ``dirty``) where a task of an app asked for since the last ``schedule()`` (``cand``, its
    sorted entries) fits are offered to those apps.  Most nodes are full: the fit test,
    cheaper than an offer that would walk the same apps and place nothing, runs on the
    candidates' eligibility and demand read once (``Candidates``), again after each offer
    (an app leaves ``cand`` with its last pending task)."""
    cdef double F[MAX_DIMS]
    cdef Candidates c = Candidates()
    cdef Py_ssize_t m
    offer_method = None if direct else core.sched._offer
    c.read(cand)
    for m in range(PyList_GET_SIZE(nodes)):
        if c.free_of(nodes, m, dirty, F) is None:
            continue
        node = <object> PyList_GET_ITEM(nodes, m)
        if direct:
            offer_walk(core, node, cand, placed, None, True)
        else:
            offer_method(node, cand, placed)
        if not cand:
            break
        c.read(cand)
    return 0


cdef class Candidates:
    """The apps of sorted entries, for ``scheduler.any_fits``: each one's eligibility bytes
    and its demand in C doubles (every app of the entries has a task pending); its fields
    are declared in _offer.pxd (the queue tree's round reads apps with ``read_apps``)."""

    def __dealloc__(self):
        self.release()

    cdef void release(self):
        PyMem_Free(self.elig)
        PyMem_Free(self.size)
        PyMem_Free(self.nd)
        PyMem_Free(self.demand)
        self.elig, self.size, self.nd, self.demand = NULL, NULL, NULL, NULL

    cdef int read(self, list entries) except -1:
        return self.read_apps([<object> PyTuple_GET_ITEM(<tuple> e, 3) for e in entries])

    cdef int read_apps(self, list apps) except -1:
        """The apps of ``apps`` that have a task pending."""
        cdef Py_ssize_t j, r, k
        cdef tuple d
        apps = [a for a in apps if aget(a, A_PENDING, "pending") > 0]
        k = PyList_GET_SIZE(apps)
        self.release()
        self.k, self.held = k, []
        self.elig = <const unsigned char **> PyMem_Malloc(max(k, 1) * sizeof(void *))
        self.size = <Py_ssize_t *> PyMem_Malloc(max(k, 1) * sizeof(Py_ssize_t))
        self.nd = <Py_ssize_t *> PyMem_Malloc(max(k, 1) * sizeof(Py_ssize_t))
        self.demand = <double *> PyMem_Malloc(max(k, 1) * MAX_DIMS * sizeof(double))
        if not (self.elig and self.size and self.nd and self.demand):
            raise MemoryError()
        for j in range(k):
            app = <object> PyList_GET_ITEM(apps, j)
            e = aget(app, A_ELIGIBLE, "eligible")
            if type(e) is not bytes:
                e = bytes(e)
            self.held.append(e)
            self.elig[j] = <const unsigned char *> PyBytes_AS_STRING(e)
            self.size[j] = PyBytes_GET_SIZE(e)
            d = aget(app, A_DEMAND, "demand")
            self.nd[j] = min(PyTuple_GET_SIZE(d), MAX_DIMS)
            for r in range(self.nd[j]):
                self.demand[j * MAX_DIMS + r] = <double> (<object> PyTuple_GET_ITEM(d, r))
        return 0

    cdef bint eligible(self, Py_ssize_t m):
        """Some app may use node m."""
        cdef Py_ssize_t j
        for j in range(self.k):
            if m < self.size[j] and self.elig[j][m]:
                return True
        return False

    cdef list free_of(self, list nodes, Py_ssize_t m, set dirty, double *F):
        """Node m's free vector (also read into F) when a fresh offer may place there: some
        app may use it, it is alive, some app's task fits its free resources, and it was
        not offered this round (not in ``dirty``); else None."""
        cdef list free
        if not self.eligible(m) or m in dirty:
            return None
        node = <object> PyList_GET_ITEM(nodes, m)
        if not nget(node, N_ALIVE, "alive"):
            return None
        free = nget(node, N_FREE, "free")
        load(free, F, PyList_GET_SIZE(free))
        return free if self.any_fits(m, F, PyList_GET_SIZE(free)) else None

    cdef bint any_fits(self, Py_ssize_t m, double *F, Py_ssize_t w):
        """Some app may use node m and its task fits F: no d_r > F_r + EPS."""
        cdef Py_ssize_t j, r, nd
        cdef double *d
        for j in range(self.k):
            if not (m < self.size[j] and self.elig[j][m]):
                continue
            d = self.demand + j * MAX_DIMS
            nd = min(self.nd[j], w)
            for r in range(nd):
                if d[r] > F[r] + EPS:
                    break
            else:
                return True
        return False


def place(sched, app, node, list order):
    """``OnlineScheduler._place`` (``place_in``)."""
    return place_in(Core(sched), app, node, order)


cdef object place_in(Core core, app, node, list order):
    """``OnlineScheduler._place``: one task of ``app`` on ``node`` (``ClusterState.allocate``),
    its key anew (``_set_key``, inline when ``sched._inline_key``: key = n u, inf for NaN as
    ``served_key``), its entry moved in the order or dropped with its last pending task."""
    cdef list main = core.sched._order
    cdef Py_ssize_t i
    container = allocate(core, app, node) if core.own_allocate else core.cluster.allocate(app, node)
    if order is not main:
        del order[entry_bisect_left(order, aget(app, A_ENTRY, "entry"))]
    i = entry_bisect_left(main, aget(app, A_ENTRY, "entry"))
    pending = aget(app, A_PENDING, "pending") - 1
    aset(app, A_PENDING, "pending", pending)
    entry = set_key(core, app)
    if pending > 0:
        reposition(main, i, entry)
        if order is not main:
            entry_insort(order, entry)
    else:
        del main[i]
        core.index.set_pending(aget(app, A_APP_ID, "app_id"), False)
    return container


def release(sched, container_id):
    """``OnlineScheduler.release``: the container's resources back to its node
    (``ClusterState.release``), its node's proof kept on the first release since the last
    ``schedule()``, its app rekeyed (``_rekey``), the node dirty when alive (``release_in``)."""
    return release_in(Core(sched), container_id)


cdef object release_in(Core core, object container_id):
    """``OnlineScheduler.release`` (``release``)."""
    sched, cluster = core.sched, core.cluster
    if not core.own_release:
        return release_by(sched, cluster, container_id)
    cdef Py_ssize_t i
    container = core.containers.pop(container_id)
    app, node = core.holders.pop(container_id)
    m = nget(node, N_INDEX, "index")
    dirty = sched._dirty
    if m not in dirty:
        sched._proof[m] = tuple(nget(node, N_FREE, "free"))
    cdef set held = nget(node, N_CONTAINERS, "containers")
    held.discard(container_id)
    cdef list free = nget(node, N_FREE, "free")
    cdef tuple cap = nget(node, N_CAPACITY, "capacity"), demand = aget(app, A_DEMAND, "demand")
    for i in range(PyTuple_GET_SIZE(demand)):
        # snap back to capacity on the last release so drift never accumulates
        free[i] = cap[i] if not held else free[i] + <object> PyTuple_GET_ITEM(demand, i)
    if cluster._free_matrix is not None:
        cluster._free_stale.add(m)
    aset(app, A_RUNNING, "running", aget(app, A_RUNNING, "running") - 1)
    if core.count_per_node:
        on_node = aget(app, A_ON_NODE, "on_node")
        k = on_node[m] - 1
        if k:
            on_node[m] = k
        else:
            del on_node[m]
    if aget(app, A_PENDING, "pending") > 0:                 # in the order: move it to its new place
        main = sched._order
        i = entry_bisect_left(main, aget(app, A_ENTRY, "entry"))
        reposition(main, i, set_key(core, app))
    else:
        set_key(core, app)
    if nget(node, N_ALIVE, "alive"):
        dirty.add(m)
    return container


cdef object allocate(Core core, app, node):
    """``ClusterState.allocate``: free -= d, a new container, the running counts."""
    cdef list free = nget(node, N_FREE, "free")
    cdef tuple demand = aget(app, A_DEMAND, "demand")
    cdef Py_ssize_t i
    for i in range(PyTuple_GET_SIZE(demand)):
        free[i] = free[i] - <object> PyTuple_GET_ITEM(demand, i)
    cid = next(core.counter)
    # Container(cid, app_id, -1, node) without the named tuple's Python-level __new__
    c = tuple.__new__(Container, (cid, aget(app, A_APP_ID, "app_id"), -1, nget(node, N_NAME, "name")))
    core.containers[cid] = c
    core.holders[cid] = (app, node)
    nget(node, N_CONTAINERS, "containers").add(cid)
    aset(app, A_RUNNING, "running", aget(app, A_RUNNING, "running") + 1)
    m = nget(node, N_INDEX, "index")
    if core.count_per_node:
        on_node = aget(app, A_ON_NODE, "on_node")
        on_node[m] = on_node.get(m, 0) + 1
    cluster = core.cluster
    if cluster._free_matrix is not None:
        cluster._free_stale.add(m)
    return c


cdef inline object set_key(Core core, app):
    """``_set_key``: the app's key and entry anew; returns the entry."""
    cdef double key
    unit = aget(app, A_UNIT, "unit") if core.inline_key else None
    if type(unit) is float:
        key = <double> aget(app, A_RUNNING, "running") * <double> unit
        k = key if key == key else float("inf")
        aset(app, A_KEY, "key", k)
        entry = (k, aget(app, A_SUBMIT, "submit"), aget(app, A_APP_ID, "app_id"), app)
        aset(app, A_ENTRY, "entry", entry)
        return entry
    core.sched._set_key(app)
    return aget(app, A_ENTRY, "entry")


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
    m = nget(node, N_INDEX, "index")
    if m not in sched._dirty:
        sched._proof[m] = tuple(nget(node, N_FREE, "free"))
    app, node = cluster.release(container_id)
    sched._rekey(app)
    if nget(node, N_ALIVE, "alive"):
        sched._dirty.add(m)
    return container


def first_fitting(index, Py_ssize_t m, list free):
    """``OnlineScheduler._first_fitting`` (``first_fitting_c``)."""
    return first_fitting_c(index, m, free)


cdef object first_fitting_c(index, Py_ssize_t m, list free):
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
