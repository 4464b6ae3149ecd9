# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Preemption's victim search compiled (rm/core/queues/victims.py, the Python reference):
``choose_victims`` and its pieces — the early answer when no other leaf is above its share,
the sources (``_sources``), the takeable containers per node (``_takeable``), the lower
bound on a node's rank (``_bound``, ``_fewest``) and the greedy walk on one node
(``_on_node``) — statement for statement, with the same subtractions, shares and fit tests
on C doubles in the same order, so it takes the same containers in the same order.

A share is max_r v_r · (1/T_r) with the first of equal values kept (Python's ``max``); a
fit is d_r <= F_r + EPS for every r, tested as ``d > F_r + EPS``.  The room returned holds
the same numbers as the reference's (as floats: the caller only subtracts and compares).
"""

import bisect

from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject

from rayrm.rm.core.cluster import AppState as _AppState, NodeState as _NodeState
from rayrm.rm.core.model import EPS as _EPS

cdef extern from *:
    int __builtin_ctz(unsigned int x) nogil

cdef double EPS = _EPS
cdef enum:
    MAX_DIMS = 64

include "_slots.pxi"

#: the slots read for every app of a source leaf and every container of an eligible node
cdef type AT = _AppState, NT = _NodeState
cdef Py_ssize_t A_RUNNING = slot_offset(AT, "running"), A_DEMAND = slot_offset(AT, "demand")
cdef Py_ssize_t A_APP_ID = slot_offset(AT, "app_id")
cdef Py_ssize_t N_ALIVE = slot_offset(NT, "alive"), N_CONTAINERS = slot_offset(NT, "containers")


include "_share.pxi"


cdef inline bint _fits(const double* d, const double* f, Py_ssize_t n) noexcept:
    cdef Py_ssize_t r
    for r in range(n):
        if d[r] > f[r] + EPS:
            return False
    return True


cdef object _on_node(list items, demand, list room, dict usage, dict floor, const double* I, Py_ssize_t k):
    """``victims._on_node``, its ``frac`` given as the resources' 1/T_r (``I``, ``k`` of them):
    the victims among ``items`` that make ``room`` fit ``demand`` and the room then, or None."""
    cdef double R[MAX_DIMS]
    cdef double D[MAX_DIMS]
    cdef double V[MAX_DIMS]
    cdef Py_ssize_t nr = len(room), nd = len(demand), fit_n, n, r, j, nu
    cdef PyObject* found
    if nr > MAX_DIMS or nd > MAX_DIMS:
        raise ValueError("a vector wider than the compiled walk takes")
    for r in range(nr):
        R[r] = room[r]
    for r in range(nd):
        D[r] = demand[r]
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
    """``_keeps`` with 1/T_r given as a list (tests/test_native.py holds it to the Python
    expression on random floors, equality included)."""
    cdef _Inverse inv = _Inverse(inverse)
    return _keeps(held, demand, inv.I, inv.k)


cdef bint _keeps(list held, demand, const double* I, Py_ssize_t k) except -1:
    """``victims._sources``' test: ``all(frac(u − d) >= f for (u, f) in held)`` (1/T_r as in
    ``_on_node``): a container of demand d could go and leave every queue of ``held`` (its
    usage u, its floor f) at or above its floor."""
    cdef double V[MAX_DIMS]
    cdef Py_ssize_t nd = len(demand), n, r, j
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


cdef class _Inverse:
    """The resources' 1/T_r as C doubles (``TreeView.inverse``), for ``frac``."""
    cdef double I[MAX_DIMS]
    cdef Py_ssize_t k

    def __cinit__(self, inverse):
        cdef Py_ssize_t r
        self.k = len(inverse)
        if self.k > MAX_DIMS:
            raise ValueError("a vector wider than the compiled search takes")
        for r in range(self.k):
            self.I[r] = inverse[r]

    cdef double frac(self, list v) except? -1.0:
        """``TreeView.frac``: max_r v_r · (1/T_r), over the first min(len(v), k) resources."""
        cdef double V[MAX_DIMS]
        cdef Py_ssize_t n = PyList_GET_SIZE(v), r
        if n > self.k:
            n = self.k
        for r in range(n):
            V[r] = <double> (<object> PyList_GET_ITEM(v, r))
        return _frac(V, self.I, n)


def choose_victims(stats, str path, app, Py_ssize_t k, warned):
    """``victims.choose_victims``: up to ``k`` lists of victims (container, app id, source
    leaf path), one per task of ``app`` (leaf ``path``)."""
    tree, cluster = stats.tree, stats.cluster
    cdef dict by_path = tree.by_path
    cdef dict fair_of = stats.fair
    if not _any_above(by_path, stats.shares, fair_of, path):
        return
    cdef _Inverse inv = _Inverse(stats.inverse)
    cdef dict kept = stats.kept           # usage less the victims already warned
    cdef dict fair = {}, over = {}, floor = {}
    for p in kept:
        fair[p] = fair_of.get(by_path[p].name, 0.0)
    for p, u in kept.items():
        over[p] = inv.frac(u) - <double> fair[p]
    for p, f in fair.items():
        floor[p] = <double> f - EPS
    cdef dict sources = _sources(tree, path, kept, over, floor, inv)
    if not sources:
        return
    cdef dict by_node = _takeable(cluster, app, sources, warned)
    cdef dict usage = {p: list(u) for p, u in kept.items()}
    demand = app.demand
    cdef list nodes = cluster.nodes
    cdef dict free = {m: list(nodes[m].free) for m in by_node}
    cdef set walked = set()             # the nodes whose items are in walk order
    # the nodes best-first by a lower bound on the rank they can reach (_bound), the lowest
    # index first among equals: a node whose bound is not below the best found cannot win
    cdef list order = []
    for m, items in by_node.items():
        b = _bound(demand, free[m], items)
        if b is not None:
            order.append((b, m))
    order.sort()
    cdef list chosen_items
    for _ in range(k):
        best = None
        for bound, m in order:
            if best is not None and (bound, m) >= (best[3], best[0]):
                break
            items = by_node[m]
            if m not in walked:         # the leaf furthest above its share first, newest first in it
                items.sort(key=lambda x: (-over[x[2]], -x[0]))
                walked.add(m)
            chosen = _on_node(items, demand, free[m], usage, floor, inv.I, inv.k)
            if chosen is not None:
                chosen_items = chosen[0]
                rank = (len(chosen_items), -_oldest(chosen_items))
                if best is None or (rank, m) < (best[3], best[0]):
                    best = (m, chosen_items, chosen[1], rank, bound)
        if best is None:
            return
        m, chosen_items, room, _, bound = best
        free[m] = [x - d for x, d in zip(room, demand)] + list(room[len(demand):])
        for item in chosen_items:
            by_node[m].remove(item)
            for p in item[3]:
                u = usage[p]
                for r, d in enumerate(item[1].demand):
                    u[r] -= d
        del order[bisect.bisect_left(order, (bound, m))]
        bound = _bound(demand, free[m], by_node[m])
        if bound is not None:
            bisect.insort(order, (bound, m))
        if chosen_items:            # none: room already, the scheduler places it there
            yield [(item[0], item[1].app_id, item[2]) for item in chosen_items]


cdef bint _any_above(dict by_path, dict dominant, dict fair_of, str path) except -1:
    """Is a leaf other than ``path`` above its fair share (u_q − F_q > EPS)?  If none is by
    its usage, none is by its usage less its warned containers: there is no source."""
    for p, q in by_path.items():
        if not q.children and p != path:
            if not (<double> dominant[p] - <double> fair_of.get(q.name, 0.0) <= EPS):
                return True
    return False


cdef object _oldest(list chosen):
    """The least container id among ``chosen`` (0 for none: ``min(..., default=0)``)."""
    if not chosen:
        return 0
    least = (<tuple> PyList_GET_ITEM(chosen, 0))[0]
    for item in chosen:
        if (<tuple> item)[0] < least:
            least = (<tuple> item)[0]
    return least


cdef dict _sources(tree, str path, dict kept, dict over, dict floor, _Inverse inv):
    """``victims._sources``: each running app of a leaf above its share (not ``path``'s) one
    of whose containers could go alone -> (its leaf, the queues it must keep at F).  The
    leaf's apps are its mask's bits, lowest first (``PendingIndex.items_in``), read from the
    mask's bytes; the test is pure, so it is not kept by demand as the reference keeps it."""
    cdef set mine = set()
    root = tree.root
    q = tree.by_path[path]
    while q is not root:
        mine.add(q.spec.path)
        q = tree._parent(q)
    cdef dict sources = {}
    cdef list chain, held
    cdef list items = tree.index._items     # ``PendingIndex.items_in``'s: slot -> app
    cdef bytes bits
    cdef const unsigned char* b
    cdef unsigned int byte
    cdef Py_ssize_t i, n
    for source, q in tree.by_path.items():
        if q.children or source == path or <double> over[source] <= EPS:
            continue
        chain = []                          # the leaf's queues (its apps' Member.path)
        mask = q.mask
        while q is not root:
            if q.spec.path not in mine:
                chain.append(q.spec.path)
            q = tree._parent(q)
        held = [(kept[p], floor[p]) for p in chain]
        found = (source, chain)
        bits = mask.to_bytes((mask.bit_length() + 7) // 8, "little")
        b = bits
        n = len(bits)
        for i in range(n):
            byte = b[i]
            while byte:
                owner = <object> PyList_GET_ITEM(items, i * 8 + __builtin_ctz(byte))
                byte &= byte - 1
                if slot_of(owner, AT, A_RUNNING, "running") and \
                        _keeps(held, slot_of(owner, AT, A_DEMAND, "demand"), inv.I, inv.k):
                    sources[slot_of(owner, AT, A_APP_ID, "app_id")] = found
    return sources


cdef dict _takeable(cluster, app, dict sources, warned):
    """``victims._takeable``: per node the starved app may use, its containers of
    ``sources``' apps not warned yet: (container, its app, source leaf, its queues)."""
    cdef dict by_node = {}
    cdef dict holders = cluster.holders, containers = cluster.containers
    cdef list nodes = cluster.nodes, items
    cdef const unsigned char[::1] eligible = app.eligible
    cdef Py_ssize_t m
    cdef PyObject* found
    for m in range(eligible.shape[0]):
        if not eligible[m]:
            continue
        node = <object> PyList_GET_ITEM(nodes, m)
        if not slot_of(node, NT, N_ALIVE, "alive"):
            continue
        items = []
        for cid in slot_of(node, NT, N_CONTAINERS, "containers"):
            # a Container is a named tuple: its app id is field 1
            found = PyDict_GetItem(sources, (<tuple> containers[cid])[1])
            if found is not NULL and cid not in warned:
                items.append((cid, (<tuple> holders[cid])[0], (<tuple> found)[0], (<tuple> found)[1]))
        if items:
            by_node[m] = items
    return by_node


cdef object _bound(demand, list room, list items):
    """``victims._bound``: a lower bound on the rank (victims, −the oldest victim's id) a
    node can reach, None when it cannot make room for ``demand`` at all."""
    cdef Py_ssize_t c
    if not items:
        return (0, 0) if _fits_py(demand, room) else None
    c = _fewest(demand, room, items)
    if c < 0 or c > len(items):
        return None
    if c == 0:
        return (0, 0)
    return c, -sorted([item[0] for item in items], reverse=True)[c - 1]


cdef Py_ssize_t _fewest(demand, list room, list items) except -2:
    """``victims._fewest``: a lower bound on the victims among ``items`` that make ``room``
    fit ``demand`` (-1: none can; the reference's inf)."""
    cdef Py_ssize_t n = 0, j, r = 0
    cdef double short, enough, got, x
    for d, f in zip(demand, room):
        short = <double> d - <double> f - EPS
        if short > 0:
            enough = short * (1 - 1e-9) - 1e-9
            got, j = 0.0, 0
            for v in sorted([item[1].demand[r] for item in items], reverse=True):
                x = v
                if got >= enough or x <= 0:
                    break
                got += x
                j += 1
            if got < enough:
                return -1
            if j > n:
                n = j
        r += 1
    return n


cdef bint _fits_py(demand, list room) except -1:
    """d_r <= F_r + EPS for every r (``victims._fits``)."""
    for d, f in zip(demand, room):
        if <double> d > <double> f + EPS:
            return False
    return True
