# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled queue tree (rm/core/queues/state.py's ``QueueTreeState`` and
rm/core/queues/scheduler.py's ``TreeScheduler``, the references): the offer's descent
(``choose`` and ``_scan``), the accounting of a placement and a release (``allocated``,
``released``), and the scheduler's round, offer and release (``tree_schedule``, ``offer_in``,
``tree_release``, which the simulator's compiled loop calls with the scheduler's ``Core``),
statement for statement, with their arithmetic on C doubles in the same order, so every
aggregate, usage and choice is the reference's.  Masks are the pending index's Python
integers; caps, usage shares and min ratios are the tree's own Python methods.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

from rayrm.rm.core.model import EPS as _EPS
from rayrm.rm.core.queues.accounts import Member as _Member, QueueState as _QueueState
from rayrm.rm.core.queues.scheduler import TreeScheduler as _TreeScheduler
from rayrm.rm.core.queues.state import LEAF_WALK, QueueTreeState as _QueueTreeState

from ._offer cimport Candidates, Core, place_in, release_in
from rayrm.rm.core.cluster import NodeState as _NodeState

cdef extern from "Python.h":
    size_t _PyLong_NumBits(object v) except? <size_t> -1

cdef double INF = float("inf")
cdef double EPS = _EPS
cdef object ONE = 1

#: a node's candidates after a placement on it are those of the last choice filtered one by
#: one (``refit``) when they were at most this many; more, and the index's bisections
#: (``fits_mask``) cost less than the walk over their bits
cdef enum:
    REFIT_MAX = 8

include "_fit.pxi"
include "_slots.pxi"

#: the queues' and members' slots, read and written at their offsets (_slots.pxi): the walk
#: reads a handful of them for every queue at every choice
cdef type QT = _QueueState, MT = _Member
cdef Py_ssize_t Q_CHILDREN = slot_offset(QT, "children"), Q_MASK = slot_offset(QT, "mask")
cdef Py_ssize_t Q_CAPPED = slot_offset(QT, "capped"), Q_WEIGHT = slot_offset(QT, "weight")
cdef Py_ssize_t Q_KIND = slot_offset(QT, "kind"), Q_AGG = slot_offset(QT, "agg")
cdef Py_ssize_t Q_MIN = slot_offset(QT, "min"), Q_NAME = slot_offset(QT, "name")
cdef Py_ssize_t Q_TRACK = slot_offset(QT, "track"), Q_USAGE = slot_offset(QT, "usage")
cdef Py_ssize_t Q_USER_LIMIT = slot_offset(QT, "user_limit"), Q_PEND = slot_offset(QT, "pend")
cdef Py_ssize_t M_PATH = slot_offset(MT, "path"), M_CONTRIB = slot_offset(MT, "contrib")
cdef Py_ssize_t M_ADMITTED = slot_offset(MT, "admitted")
cdef type NT = _NodeState
cdef Py_ssize_t N_ALIVE = slot_offset(NT, "alive"), N_FREE = slot_offset(NT, "free")


cdef inline object qget(object q, Py_ssize_t offset, str name):
    """``q.<name>`` (``slot_of``: a ``QueueState``'s at its offset)."""
    return slot_of(q, QT, offset, name)


cdef inline int qset(object q, Py_ssize_t offset, str name, object value) except -1:
    """``q.<name> = value`` (``set_slot_of``)."""
    return set_slot_of(q, QT, offset, name, value)


cdef inline object get_node(object node, Py_ssize_t offset, str name):
    """``node.<name>`` (``slot_of``: a ``NodeState``'s at its offset)."""
    return slot_of(node, NT, offset, name)


cdef inline object mget(object member, Py_ssize_t offset, str name):
    """``member.<name>`` (``slot_of``: a ``Member``'s at its offset)."""
    return slot_of(member, MT, offset, name)


cdef class Walk:
    """What the tree's round reads of a scheduler and its tree that stays the same for their
    life (the tree, its pending index and root, and which of their methods are this
    module's), read once a run with the scheduler's ``Core`` (``walk_of``)."""
    cdef object tree, index, fits, root
    cdef bint naive, compiled_choose, own_accounts, plain_round, proofs_hold, direct
    cdef bint own_changed, own_released, uncapped

    def __init__(self, sched):
        tree = sched.tree
        kind = type(tree)
        self.tree, self.index, self.root, self.naive = tree, tree.index, tree.root, tree.naive
        self.fits = tree.index.fits_mask
        self.compiled_choose = tree._native_choose
        # no queue's caps can hold an app back: the descent then always ends at the leaf of
        # a lone candidate (``choose_among``)
        self.uncapped = not any(q.capped for q in tree.queues)
        # the base tree's accounting is this module's (its ``allocated`` calls ``allocated``)
        self.own_accounts = tree._native and kind.allocated is _QueueTreeState.allocated
        self.own_released = tree._native and kind.released is _QueueTreeState.released
        self.own_changed = kind.node_changed is _QueueTreeState.node_changed      # a no-op
        # the base tree's round is the dirty nodes in node order, closed with nothing to do
        self.plain_round = kind.offer_round is _QueueTreeState.offer_round and \
            kind.close_round is _QueueTreeState.close_round
        self.proofs_hold = sched._tree_proofs
        # the compiled offer, unless a subclass offers or places its own way
        self.direct = (type(sched)._offer_tree is _TreeScheduler._offer_tree and
                       type(sched)._place is _TreeScheduler._place and "_place" not in sched.__dict__)


cdef inline Walk walk_of(Core core):
    if core.tree_walk is None:
        core.tree_walk = Walk(core.sched)
    return <Walk> core.tree_walk


def choose(tree, Py_ssize_t m, free, list order):
    """``QueueTreeState.choose`` (rm/core/queues/state.py, the reference): down the tree to
    the active child of least (needy, ρ, name), then the least entry among the leaf's
    candidates; the masks are the pending index's, caps, usage shares and min ratios the
    tree's own Python methods."""
    return choose_in(tree, tree.index, tree.index.fits_mask, tree.root, tree.naive, m, free, order)


cdef object choose_in(tree, index, fits, root, bint naive, Py_ssize_t m, free, list order):
    """``choose`` with what it reads of the tree given."""
    return choose_among(tree, index, root, naive, False, m, fits(m, free), order)


cdef object choose_among(tree, index, root, bint naive, bint uncapped, Py_ssize_t m, fit, list order):
    """``choose`` from the node's candidates ``fit`` (``fits_mask(m, free)``).  ``uncapped``:
    no queue has caps, so a lone candidate is the choice: each queue on its path is then
    the only active child of its parent (the descent's only side effect, a capped queue's
    blocked nodes, cannot happen), and its leaf's least entry is its own."""
    q = root
    cdef dict memo
    cdef list items = index._items      # slot -> app (``PendingIndex.item``)
    # (bit_count reads the digits once; ``fit & -fit`` would make two integers as wide)
    if uncapped and fit and fit.bit_count() == 1:
        return (<tuple> (<object> PyList_GET_ITEM(items, _PyLong_NumBits(fit) - 1)).entry)[3]
    memo = {}
    while fit and qget(q, Q_CHILDREN, "children"):
        found = memo[q] if q in memo else _scan(tree, q, fit, m, memo, naive)
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
    cdef Py_ssize_t slot
    while fit:                          # highest slot first: the least entry is the same
        slot = <Py_ssize_t> _PyLong_NumBits(fit) - 1
        entry = (<object> PyList_GET_ITEM(items, slot)).entry
        if best_entry is None or entry < best_entry:
            best_entry = entry
        fit ^= ONE << slot
    return (<tuple> best_entry)[3]


cdef object refit(index, fit, double *F, Py_ssize_t w):
    """``fits_mask(m, F)`` just after one placement on node m, from ``fit``, the node's
    candidates at the choice that made it: the pending index's answer is the pending apps
    that may use m and whose demand fits F (no d_r > F_r + EPS, as its bisections), and
    since then only the placed app's pending count and m's free vector changed (down), so
    the answer is the apps of ``fit`` still pending whose demand fits F, each tested."""
    cdef Py_ssize_t slot, r, nd
    cdef list demand = index._demand
    cdef tuple d
    out = fit & index._pending
    rest = out
    while rest:                         # highest slot first
        slot = <Py_ssize_t> _PyLong_NumBits(rest) - 1
        bit = ONE << slot
        d = <tuple> PyList_GET_ITEM(demand, slot)
        nd = min(PyTuple_GET_SIZE(d), w)
        for r in range(nd):
            if <double> (<object> PyTuple_GET_ITEM(d, r)) > F[r] + EPS:
                out ^= bit
                break
        rest ^= bit
    return out


def refit_of(index, fit, free):
    """``refit`` for the tests: ``fit`` filtered to the pending apps whose task fits ``free``."""
    cdef double F[MAX_DIMS]
    cdef Py_ssize_t w = len(free)
    load(free, F, w)
    return refit(index, fit, F, w)


cdef object _scan(tree, q, fit, Py_ssize_t m, dict memo, bint naive):
    """``QueueTreeState._scan``: q's active children on node m (candidates ``fit``) — the one
    of least (needy, ρ, name), its candidates, min ρ over them, Σ their weights — or None;
    kept in ``memo`` for the descent."""
    cdef double low = INF, wsum = 0.0, rho, val, ratio, b_val = INF, weight
    cdef int tier, b_tier = 2
    best = None
    best_cf = 0
    for c in qget(q, Q_CHILDREN, "children"):
        cf = fit & qget(c, Q_MASK, "mask")
        if not cf:
            continue
        if qget(c, Q_CAPPED, "capped"):
            within = tree._within_caps(c, cf)
            if within != cf:
                c.blocked.add(m)
            cf = within
            if not cf:
                continue
        weight = qget(c, Q_WEIGHT, "weight")
        if qget(c, Q_CHILDREN, "children") and not naive:
            below = _scan(tree, c, cf, m, memo, naive)
            if below is None:
                continue
            rho = <double> (<tuple> below)[2] * <double> (<tuple> below)[3] / weight
        elif qget(c, Q_KIND, "kind") is None:
            rho = <double> qget(c, Q_AGG, "agg") / weight
        else:
            rho = tree.usage_share(c, qget(c, Q_WEIGHT, "weight"))
        if rho < low:
            low = rho
        wsum += weight
        tier, val = 1, rho
        if qget(c, Q_MIN, "min") is not None:
            ratio = c.min_ratio()
            if ratio < 1:
                tier, val = 0, ratio
        if tier < b_tier or (tier == b_tier and (val < b_val or (val == b_val and
                                                                 qget(c, Q_NAME, "name") < qget(best, Q_NAME, "name")))):
            best, best_cf, b_tier, b_val = c, cf, tier, val
    found = None if best is None else (best, best_cf, low, wsum)
    memo[q] = found
    return found


def allocated(tree, app):
    """``QueueTreeState.allocated``: one more task of ``app`` runs, one fewer pending."""
    member = tree.members[app.app_id]
    demand, user, contrib = app.demand, member.user, mget(member, M_CONTRIB, "contrib")
    cdef bint admit = not mget(member, M_ADMITTED, "admitted")
    cdef bint pending = tree.tracks_pending
    cdef Py_ssize_t k = 0, r, nd = len(demand)
    cdef list usage, pend
    if admit:
        member.admitted = True
    for q in mget(member, M_PATH, "path"):
        qset(q, Q_AGG, "agg", <double> qget(q, Q_AGG, "agg") + <double> contrib[k])
        if qget(q, Q_TRACK, "track"):
            usage = qget(q, Q_USAGE, "usage")
            for r in range(nd):
                usage[r] = <double> usage[r] + <double> demand[r]
            if qget(q, Q_USER_LIMIT, "user_limit") is not None:
                usage = q.users[user][0]
                for r in range(nd):
                    usage[r] = <double> usage[r] + <double> demand[r]
        if pending:
            pend = qget(q, Q_PEND, "pend")
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
    demand, contrib = app.demand, mget(member, M_CONTRIB, "contrib")
    cdef Py_ssize_t k = 0, r, nd = len(demand)
    cdef list usage
    for q in mget(member, M_PATH, "path"):
        qset(q, Q_AGG, "agg", <double> qget(q, Q_AGG, "agg") - n * <double> contrib[k])
        if qget(q, Q_TRACK, "track"):
            usage = qget(q, Q_USAGE, "usage")
            for r in range(nd):
                usage[r] = <double> usage[r] + (-n) * <double> demand[r]
            if qget(q, Q_USER_LIMIT, "user_limit") is not None:
                usage = q.users[member.user][0]
                for r in range(nd):
                    usage[r] = <double> usage[r] + (-n) * <double> demand[r]
        k += 1
    return tree.take_blocked(member.capped) if member.capped else ()


def release(sched, container_id):
    """``TreeScheduler.release`` under the native core (``tree_release``)."""
    return tree_release(Core(sched), container_id)


cdef object tree_release(Core core, object container_id):
    """``TreeScheduler.release``: the compiled ``OnlineScheduler.release``, then the tree's
    own ``node_changed`` and ``released`` (the base tree's: nothing, and this module's) and
    its caps' blocked nodes offered again."""
    cdef Walk w = walk_of(core)
    sched, tree = core.sched, w.tree
    app, node = core.holders[container_id]
    container = release_in(core, container_id)
    if not w.own_changed:
        tree.node_changed(node.index)
    blocked = released(tree, app) if w.own_released else tree.released(app)
    if blocked:
        sched._redirty(blocked)
    return container


def offer(sched, node, list placed, proof=None, asked=()):
    """``TreeScheduler._offer_tree`` with its ``_place`` (``offer_in``)."""
    offer_in(Core(sched), node, placed, proof, asked)


cdef int offer_in(Core core, node, list placed, proof, asked) except -1:
    """``TreeScheduler._offer_tree`` with its ``_place`` (the compiled
    ``OnlineScheduler._place``, then the tree's ``allocated``): ``node`` offered down the tree
    until nothing more is chosen, or until its free vector is back under its ``proof`` and no
    app ``asked`` for since fits (the reference's docstring).  After a placement the node's
    candidates are the last ones re-tested (``refit``) when few, instead of asked of the
    pending index again; the base tree's accounting only (a subclass's may do more)."""
    cdef Walk wk = walk_of(core)
    sched, tree = core.sched, wk.tree
    cdef double F[MAX_DIMS]
    cdef list free = get_node(node, N_FREE, "free")
    cdef Py_ssize_t m = node.index, w = PyList_GET_SIZE(free), r
    cdef list order = sched._order
    cdef bint incremental = wk.compiled_choose and wk.own_accounts
    fit = None
    while True:
        if not wk.compiled_choose:
            app = tree.choose(m, free, order)
        else:
            if fit is None or not incremental or fit.bit_count() > REFIT_MAX:
                fit = wk.fits(m, free)
            else:
                load(free, F, w)
                fit = refit(wk.index, fit, F, w)
            app = choose_among(tree, wk.index, wk.root, wk.naive, wk.uncapped, m, fit, order)
        if app is None:
            return 0
        container = place_in(core, app, node, sched._order)
        if wk.own_accounts:
            allocated(tree, app)
        else:
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
                return 0


def schedule(sched):
    """``TreeScheduler.schedule`` under the native core (``tree_schedule``)."""
    return tree_schedule(Core(sched))


cdef list tree_schedule(Core core):
    """``TreeScheduler.schedule`` (rm/core/queues/scheduler.py, the reference), the same
    steps: the dirty nodes offered down the tree in the tree's round order, each with its
    proof; then, in node order, the nodes a fresh app may use where one of them still has a
    task pending that fits, each with its free vector as its proof when proofs hold."""
    sched = core.sched
    cdef list placed = []
    cdef double F[MAX_DIMS]
    cdef Py_ssize_t m
    cdef list nodes, free, fresh_apps
    cdef Candidates cand
    cdef Walk wk = walk_of(core)
    dirty, fresh = sched._dirty, sched._fresh
    tree = wk.tree
    if not dirty and not fresh and not tree.deferred:
        return placed
    cdef bint proofs_hold = wk.proofs_hold, direct = wk.direct, plain_round = wk.plain_round
    proofs = sched._proof if proofs_hold else {}
    sched._dirty, sched._fresh, sched._proof = set(), {}, {}
    nodes = core.cluster.nodes
    stopped = None if sched._order else -1
    asked = list(fresh.values())
    for m in (sorted(dirty) if plain_round else tree.offer_round(dirty, bool(fresh))):
        node = <object> PyList_GET_ITEM(nodes, m)
        if get_node(node, N_ALIVE, "alive") and sched._order:
            if direct:
                offer_in(core, node, placed, proofs.get(m), asked)
            else:
                sched._offer_tree(node, placed, proofs.get(m), asked)
            if not sched._order:
                stopped = m
    if not plain_round:
        tree.close_round(stopped)
    fresh_apps = [a for a in fresh.values() if a.pending > 0]
    if fresh_apps and sched._order:
        # only nodes some fresh app may use, and of those only where one of them fits (by
        # the invariant, no older app fits a node that was not freed since); the fit test on
        # the apps' eligibility and demand read once, again after each offer
        cand = Candidates()
        cand.read_apps(fresh_apps)
        for m in range(len(fresh_apps[0].eligible)):
            free = cand.free_of(nodes, m, dirty, F)
            if free is None:
                continue
            node = <object> PyList_GET_ITEM(nodes, m)
            if direct:
                offer_in(core, node, placed, tuple(free) if proofs_hold else None, fresh_apps)
            else:
                sched._offer_tree(node, placed, tuple(free) if proofs_hold else None, fresh_apps)
            if not sched._order:
                break
            cand.read_apps(fresh_apps)
    sched.placements += len(placed)
    return placed
