# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled queue tree (rm/core/queues/state.py's ``QueueTreeState``, the reference): the
offer's descent (``choose`` and ``_scan``) and the accounting of a placement and a release
(``allocated``, ``released``; and ``TreeScheduler.release``, which the simulator's compiled
steps call), statement for statement, with their arithmetic on C doubles
in the same order, so every aggregate, usage and choice is the reference's.  Masks are the
pending index's Python integers; caps, usage shares and min ratios are the tree's own
Python methods.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

from rayrm.rm.core.model import EPS as _EPS
from rayrm.rm.core.queues.state import LEAF_WALK

from . import _offer

cdef double INF = float("inf")
cdef double EPS = _EPS

include "_fit.pxi"


def choose(tree, Py_ssize_t m, free, list order):
    """``QueueTreeState.choose`` (rm/core/queues/state.py, the reference): down the tree to
    the active child of least (needy, ρ, name), then the least entry among the leaf's
    candidates; the masks are the pending index's, caps, usage shares and min ratios the
    tree's own Python methods."""
    index = tree.index
    fit = index.fits_mask(m, free)
    q = tree.root
    cdef dict memo = {}
    while fit and q.children:
        found = memo[q] if q in memo else _scan(tree, q, fit, m, memo)
        if found is None:
            return None
        q, fit = (<tuple> found)[0], (<tuple> found)[1]
    if not fit:
        return None
    if fit.bit_count() > LEAF_WALK:
        bit = index.bit
        for entry in order:
            if fit & bit((<tuple> entry)[2]):
                return (<tuple> entry)[3]
    best_entry = None
    item = index.item
    while fit:
        low = fit & -fit
        entry = item(low).entry
        if best_entry is None or entry < best_entry:
            best_entry = entry
        fit ^= low
    return (<tuple> best_entry)[3]


cdef object _scan(tree, q, fit, Py_ssize_t m, dict memo):
    """``QueueTreeState._scan``: q's active children on node m (candidates ``fit``) — the one
    of least (needy, ρ, name), its candidates, min ρ over them, Σ their weights — or None;
    kept in ``memo`` for the descent."""
    cdef double low = INF, wsum = 0.0, rho, val, ratio, b_val = INF, weight
    cdef int tier, b_tier = 2
    cdef bint naive = tree.naive
    best = None
    best_cf = 0
    for c in q.children:
        cf = fit & c.mask
        if not cf:
            continue
        if c.capped:
            within = tree._within_caps(c, cf)
            if within != cf:
                c.blocked.add(m)
            cf = within
            if not cf:
                continue
        weight = c.weight
        if c.children and not naive:
            below = _scan(tree, c, cf, m, memo)
            if below is None:
                continue
            rho = <double> (<tuple> below)[2] * <double> (<tuple> below)[3] / weight
        elif c.kind is None:
            rho = <double> c.agg / weight
        else:
            rho = tree.usage_share(c, c.weight)
        if rho < low:
            low = rho
        wsum += weight
        tier, val = 1, rho
        if c.min is not None:
            ratio = c.min_ratio()
            if ratio < 1:
                tier, val = 0, ratio
        if tier < b_tier or (tier == b_tier and (val < b_val or (val == b_val and c.name < best.name))):
            best, best_cf, b_tier, b_val = c, cf, tier, val
    found = None if best is None else (best, best_cf, low, wsum)
    memo[q] = found
    return found


def allocated(tree, app):
    """``QueueTreeState.allocated``: one more task of ``app`` runs, one fewer pending."""
    member = tree.members[app.app_id]
    demand, user, contrib = app.demand, member.user, member.contrib
    cdef bint admit = not member.admitted
    cdef bint pending = tree.tracks_pending
    cdef Py_ssize_t k = 0, r, nd = len(demand)
    cdef list usage, pend
    member.admitted = True
    for q in member.path:
        q.agg = <double> q.agg + <double> contrib[k]
        if q.track:
            usage = q.usage
            for r in range(nd):
                usage[r] = <double> usage[r] + <double> demand[r]
            if q.user_limit is not None:
                usage = q.users[user][0]
                for r in range(nd):
                    usage[r] = <double> usage[r] + <double> demand[r]
        if pending:
            pend = q.pend
            for r in range(len(pend)):
                pend[r] = <double> pend[r] - <double> demand[r]
        if admit:
            q.running_apps += 1
            q.waiting &= ~member.bit
        k += 1


def released(tree, app, long n=1):
    """``QueueTreeState.released``: ``n`` tasks of ``app`` ended; the nodes its queues' caps
    had blocked."""
    member = tree.members[app.app_id]
    demand, contrib = app.demand, member.contrib
    cdef Py_ssize_t k = 0, r, nd = len(demand)
    cdef list usage
    for q in member.path:
        q.agg = <double> q.agg - n * <double> contrib[k]
        if q.track:
            usage = q.usage
            for r in range(nd):
                usage[r] = <double> usage[r] + (-n) * <double> demand[r]
            if q.user_limit is not None:
                usage = q.users[member.user][0]
                for r in range(nd):
                    usage[r] = <double> usage[r] + (-n) * <double> demand[r]
        k += 1
    return tree.take_blocked(member.capped) if member.capped else ()


def release(sched, container_id):
    """``TreeScheduler.release`` under the native core: the compiled
    ``OnlineScheduler.release``, then the tree's own ``node_changed`` and ``released`` and
    its caps' blocked nodes offered again."""
    app, node = sched.cluster.holders[container_id]
    container = _offer.release(sched, container_id)
    tree = sched.tree
    tree.node_changed(node.index)
    blocked = tree.released(app)
    if blocked:
        sched._redirty(blocked)
    return container


def offer(sched, node, list placed, proof=None, asked=()):
    """``TreeScheduler._offer_tree`` with its ``_place`` (the compiled
    ``OnlineScheduler._place``, then the tree's ``allocated``): ``node`` offered down the tree
    until nothing more is chosen, or until its free vector is back under its ``proof`` and no
    app ``asked`` for since fits (the reference's docstring)."""
    tree = sched.tree
    cdef bint compiled_choose = tree._native_choose
    cdef double F[MAX_DIMS]
    cdef list free = node.free
    cdef Py_ssize_t m = node.index, w = PyList_GET_SIZE(free), r
    walk = tree.choose
    order = sched._order
    while True:
        app = choose(tree, m, free, order) if compiled_choose else walk(m, free, order)
        if app is None:
            return
        container = _offer.place(sched, app, node, sched._order)
        tree.allocated(app)
        placed.append(container)
        if proof is None:
            continue
        load(free, F, w)
        for r in range(w):
            if F[r] > <double> proof[r]:
                break
        else:
            for a in asked:
                if a.pending > 0 and fits(a, m, F, w):
                    break
            else:
                return
