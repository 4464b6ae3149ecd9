# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled water-filling (rm/core/queues/fairshare.py, the Python reference):
``fair_shares`` on C doubles, the same operations in the same order, so every share is the
same float; and ``TreeShape.view``, preemption's view of the tree at an evaluation (u, δ and
F of every queue: rm/core/queues/treeview.py, the Python reference), which the rules ask for
every half second of trace time; and ``LeafClocks``, the rules' starvation clocks moved on
that view (rm/core/queues/preemption.py's ``LeafClocks``, the reference).

Python's ``max(x, y)`` keeps x unless y > x and ``min(x, y)`` keeps x unless y < x; the
clamps below are written that way.  ``sum`` of floats adds them left to right from 0.0.
"""

from cpython.list cimport PyList_GET_ITEM
from libc.math cimport INFINITY
from libc.stdlib cimport calloc, free, malloc, qsort

from rayrm.rm.core.model import EPS as _EPS

cdef extern from "Python.h":
    size_t _PyLong_NumBits(object v) except? <size_t> -1

cdef double EPS = _EPS


cdef int _ascending(const void* a, const void* b) noexcept nogil:
    cdef double x = (<const double*>a)[0]
    cdef double y = (<const double*>b)[0]
    return (x > y) - (x < y)


cdef inline double _clamp(double r, double w, double a, double b) noexcept:
    """min(max(r · w, a), b) (fairshare.clamp_share)."""
    cdef double t = r * w
    if a > t:
        t = a
    if b < t:
        t = b
    return t


cdef double _ratio(const double* w, const double* lo, const double* hi, Py_ssize_t n, double total,
                   double* points) noexcept:
    """fairshare.weight_to_share_ratio; ``points`` has room for 2n breakpoints."""
    cdef double target, s = 0.0, left = 0.0, right, mid, fixed, slope, r, p
    cdef Py_ssize_t i, j, k = 0, m = 0
    for i in range(n):
        s += hi[i]
    target = s if s < total else total          # min(total, sum(hi))
    s = 0.0
    for i in range(n):
        s += _clamp(0.0, w[i], lo[i], hi[i])
    if s >= target:
        return 0.0
    for i in range(n):
        if w[i] > 0:
            p = lo[i] / w[i]
            if p < INFINITY:
                points[k] = p
                k += 1
            p = hi[i] / w[i]
            if p < INFINITY:
                points[k] = p
                k += 1
    qsort(points, k, sizeof(double), _ascending)
    for i in range(k):                          # the set's distinct values, ascending
        if m == 0 or points[i] != points[m - 1]:
            points[m] = points[i]
            m += 1
    for j in range(m + 1):
        right = points[j] if j < m else INFINITY
        # on [left, right] Σ s_i(R) = fixed + R · slope: each term is a constant or R · w_i
        mid = left + 1.0 if right == INFINITY else (left + right) / 2
        fixed = 0.0
        slope = 0.0
        for i in range(n):
            if lo[i] >= hi[i] or mid * w[i] <= lo[i] or mid * w[i] >= hi[i]:
                fixed += _clamp(mid, w[i], lo[i], hi[i])
            else:
                slope += w[i]
        if slope > 0:
            r = (target - fixed) / slope
            if (left - 1e-12 <= r and r <= right + 1e-12) or right == INFINITY:
                return left if left > r else r
        elif fixed >= target - 1e-9:
            return left
        left = right
    return INFINITY


cdef void _shares(const double* w, const double* lo, const double* hi, Py_ssize_t n, double total,
                  double* points, double* out) noexcept:
    """fairshare.fair_shares into ``out``; ``points`` has room for 2n doubles."""
    cdef double r = _ratio(w, lo, hi, n, total, points), t
    cdef Py_ssize_t i
    for i in range(n):
        if r < INFINITY:
            out[i] = _clamp(r, w[i], lo[i], hi[i])
        else:
            t = lo[i]                           # min(max(a, 0.0), b)
            if 0.0 > t:
                t = 0.0
            if hi[i] < t:
                t = hi[i]
            out[i] = t


def fair_shares(weights, lo, hi, double total) -> list:
    """Each schedulable's fair share s_i(R) of ``total`` (fairshare.fair_shares)."""
    cdef Py_ssize_t n = len(weights), i
    if n == 0:
        return []
    cdef double* buf = <double*>malloc(6 * n * sizeof(double))
    if buf == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            buf[i] = weights[i]
            buf[n + i] = lo[i]
            buf[2 * n + i] = hi[i]
        _shares(buf, buf + n, buf + 2 * n, n, total, buf + 3 * n, buf + 5 * n)
        return [buf[5 * n + i] for i in range(n)]
    finally:
        free(buf)


include "_share.pxi"


cdef class ViewValues:
    """One view's u_i and δ_i in queue order and F_i in ``fill_names`` order, copied out of
    its shape's work arrays (the next view overwrites those); the dicts ``TreeView`` reads
    are made when asked."""

    cdef double* v                      # u (n), then δ (n), then F (n)
    cdef Py_ssize_t n
    cdef list paths, names

    def __dealloc__(self):
        free(self.v)

    def shares(self) -> dict:
        """{path: u_i}."""
        cdef Py_ssize_t i
        return {self.paths[i]: self.v[i] for i in range(self.n)}

    def demand_shares(self) -> dict:
        """{path: δ_i}."""
        cdef Py_ssize_t i
        return {self.paths[i]: self.v[self.n + i] for i in range(self.n)}

    def fair(self) -> dict:
        """{full name: F_i}."""
        cdef Py_ssize_t i
        return {self.names[i]: self.v[2 * self.n + i] for i in range(self.n)}


cdef class TreeShape:
    """A queue tree's fixed shape for ``view`` (rm/core/queues/treeview.py's ``_shape``):
    queue i's parent, children, weight, m_i and M_i, the resources' 1/T_r, and the order F
    is reported in."""

    cdef Py_ssize_t n, k, widest
    cdef int* start
    cdef int* count
    cdef int* kids
    cdef double* weight
    cdef double* m
    cdef double* big
    cdef double* inverse
    cdef int* order
    cdef double* work
    cdef double* last                   # the last view's hi (min(M, δ); -1: inactive) and F
    cdef bint have_last
    cdef public list fill_names
    cdef list paths

    def __cinit__(self, list parents, list children, list weights, list ms, list bigs, list inverse,
                  list order, list fill_names, list paths):
        cdef Py_ssize_t i, j, at = 0, n = len(parents), k = len(inverse)
        self.n, self.k, self.fill_names, self.paths = n, k, fill_names, paths
        self.start = <int*>malloc(n * sizeof(int))
        self.count = <int*>malloc(n * sizeof(int))
        self.kids = <int*>malloc(n * sizeof(int))
        self.order = <int*>malloc(n * sizeof(int))
        self.weight = <double*>malloc(n * sizeof(double))
        self.m = <double*>malloc(n * sizeof(double))
        self.big = <double*>malloc(n * sizeof(double))
        self.inverse = <double*>malloc((k + 1) * sizeof(double))
        # per queue: usage, pending demand and demand (k each), share, demand share, F; and the
        # water-filling's scratch for the widest parent (w, lo, hi, 2 points, out: 6 each)
        self.widest = max([len(c) for c in children] + [1])
        self.work = <double*>malloc((n * (3 * k + 3) + 6 * self.widest) * sizeof(double))
        self.last = <double*>malloc(2 * n * sizeof(double))
        self.have_last = False
        if not (self.start and self.count and self.kids and self.order and self.weight and self.m
                and self.big and self.inverse and self.work and self.last):
            raise MemoryError()
        for i in range(n):
            self.start[i], self.count[i] = at, len(children[i])
            for j in children[i]:
                self.kids[at] = j
                at += 1
            self.weight[i], self.m[i], self.big[i] = weights[i], ms[i], bigs[i]
            self.order[i] = order[i]
        for i in range(k):
            self.inverse[i] = inverse[i]

    def __dealloc__(self):
        free(self.start)
        free(self.count)
        free(self.kids)
        free(self.order)
        free(self.weight)
        free(self.m)
        free(self.big)
        free(self.inverse)
        free(self.work)
        free(self.last)

    def view(self, list queues) -> ViewValues:
        """u_i, δ_i and F_i of the QueueStates ``queues`` (the tree's, root first; their
        ``usage`` and ``pend``), left in the work arrays (``LeafClocks.scan`` reads them there)
        and copied into the ``ViewValues`` returned."""
        cdef Py_ssize_t n = self.n, k = self.k, i, r, j
        cdef double* usage = self.work
        cdef double* pend = usage + n * k
        cdef double* demand = pend + n * k
        cdef double* share = demand + n * k
        cdef double* delta = share + n
        cdef double* fair = delta + n
        cdef list u, p
        for i in range(1, n):
            q = queues[i]
            u, p = q.usage, q.pend
            for r in range(k):
                usage[i * k + r] = u[r]
                pend[i * k + r] = p[r]
                demand[i * k + r] = usage[i * k + r] + pend[i * k + r]
        for r in range(k):                      # root: its children's sums, left to right
            usage[r] = 0.0
            pend[r] = 0.0
            for j in range(self.start[0], self.start[0] + self.count[0]):
                usage[r] += usage[self.kids[j] * k + r]
                pend[r] += pend[self.kids[j] * k + r]
            demand[r] = usage[r] + pend[r]
        for i in range(n):
            share[i] = _frac(usage + i * k, self.inverse, k)
            delta[i] = _frac(demand + i * k, self.inverse, k)
        # F is a function of every queue's hi = min(M, δ) and whether it is active (δ > 0):
        # while the leaves stay backlogged those repeat, and so does F (the Python
        # reference keeps its answers by the same inputs)
        cdef bint same = self.have_last
        cdef double hi
        for i in range(1, n):
            hi = (delta[i] if delta[i] < self.big[i] else self.big[i]) if delta[i] > 0 else -1.0
            if hi != self.last[i]:
                same = False
                self.last[i] = hi
        if same:
            for i in range(n):
                fair[i] = self.last[n + i]
        else:
            fair[0] = 1.0
            self._fill(0, delta, fair)
            for i in range(n):
                self.last[n + i] = fair[i]
            self.have_last = True
        cdef ViewValues out = ViewValues.__new__(ViewValues)
        out.v = <double*>malloc(3 * n * sizeof(double))
        if out.v == NULL:
            raise MemoryError()
        out.n, out.paths, out.names = n, self.paths, self.fill_names
        for i in range(n):
            out.v[i] = share[i]
            out.v[n + i] = delta[i]
            out.v[2 * n + i] = fair[self.order[i]]
        return out

    cdef void _fill(self, Py_ssize_t q, const double* delta, double* fair) noexcept:
        """treeview.TreeView._fill: q's F divided among its active children, then below."""
        cdef Py_ssize_t j, c, a = 0, w0 = self.widest
        cdef double* scratch = self.work + self.n * (3 * self.k + 3)
        cdef double hi, lo
        for j in range(self.start[q], self.start[q] + self.count[q]):
            c = self.kids[j]
            fair[c] = 0.0
            if delta[c] > 0:
                hi = delta[c] if delta[c] < self.big[c] else self.big[c]      # min(M, δ)
                lo = hi if hi < self.m[c] else self.m[c]                      # min(m, hi)
                scratch[a] = self.weight[c]
                scratch[w0 + a] = lo
                scratch[2 * w0 + a] = hi
                a += 1
        if a:
            _shares(scratch, scratch + w0, scratch + 2 * w0, a, fair[q], scratch + 3 * w0, scratch + 5 * w0)
            a = 0
            for j in range(self.start[q], self.start[q] + self.count[q]):
                c = self.kids[j]
                if delta[c] > 0:
                    fair[c] = scratch[5 * w0 + a]
                    a += 1
        for j in range(self.start[q], self.start[q] + self.count[q]):
            c = self.kids[j]
            if self.count[c]:
                self._fill(c, delta, fair)


cdef bint _placeable(index, leaf) except -1:
    """``TreeView.placeable``: has ``leaf`` an app with a task pending and an eligible node?
    Its apps with a task pending, lowest slot first, till one has."""
    cdef list items = index._items          # slot -> app (``PendingIndex.item``)
    mask = index._pending & leaf.mask
    while mask:
        low = mask & -mask
        app = <object> PyList_GET_ITEM(items, _PyLong_NumBits(low) - 1)
        if app.pending > 0 and app.eligible_count > 0:
            return True
        mask ^= low
    return False


cdef class LeafClocks:
    """preemption.LeafClocks (the reference) on C arrays: per leaf i the same clocks, and
    ``scan`` the same tests in the same order on the C doubles of the view just taken (the
    TreeView's ``shape``: u, δ, F and the usage of every queue), so the same clocks move, the
    same episodes end and the same leaves preempt with the same targets."""

    cdef Py_ssize_t n
    cdef list leaves, paths, names
    cdef double* t_min
    cdef double* t_fair
    cdef double* theta
    cdef double* since_min
    cdef double* since_fair
    cdef double* since
    cdef double* next_search
    cdef unsigned char* has_min         # since_min runs
    cdef unsigned char* has_fair        # since_fair runs
    cdef unsigned char* episode         # since runs: an open episode
    cdef unsigned char* has_next        # next_search set
    cdef int* at                        # leaf -> its queue's index in ``bound``
    cdef TreeShape bound

    def __cinit__(self, list leaves):
        cdef Py_ssize_t i, n = len(leaves)
        self.n, self.leaves = n, leaves
        self.paths = [leaf[0] for leaf in leaves]
        self.names = [leaf[1] for leaf in leaves]
        self.t_min = <double*>calloc(7 * n + 1, sizeof(double))     # zeros: a clock not set pickles as 0
        self.has_min = <unsigned char*>calloc(4 * n + 1, 1)
        self.at = <int*>malloc((n + 1) * sizeof(int))
        if not (self.t_min and self.has_min and self.at):
            raise MemoryError()
        self.t_fair, self.theta = self.t_min + n, self.t_min + 2 * n
        self.since_min, self.since_fair = self.t_min + 3 * n, self.t_min + 4 * n
        self.since, self.next_search = self.t_min + 5 * n, self.t_min + 6 * n
        self.has_fair, self.episode, self.has_next = self.has_min + n, self.has_min + 2 * n, self.has_min + 3 * n
        for i in range(n):
            _, _, self.t_min[i], self.t_fair[i], self.theta[i] = leaves[i]

    def __dealloc__(self):
        free(self.t_min)
        free(self.has_min)
        free(self.at)

    def __reduce__(self):
        """Pickled with its clocks (the replay's RM snapshots its state, the rules in it, and
        reads it back with only rayrm's classes callable); the shape is bound again at the
        next scan."""
        return LeafClocks, (self.leaves,), [
            (self.has_min[i], self.since_min[i], self.has_fair[i], self.since_fair[i], self.episode[i],
             self.since[i], self.has_next[i], self.next_search[i]) for i in range(self.n)]

    def __setstate__(self, list clocks):
        cdef Py_ssize_t i
        for i in range(self.n):
            (self.has_min[i], self.since_min[i], self.has_fair[i], self.since_fair[i], self.episode[i],
             self.since[i], self.has_next[i], self.next_search[i]) = clocks[i]

    cdef int _bind(self, TreeShape shape) except -1:
        """Each leaf's queue index in ``shape`` (a new shape comes with a new cluster total)."""
        where = {path: j for j, path in enumerate(shape.paths)}
        for i in range(self.n):
            self.at[i] = where[self.paths[i]]
        self.bound = shape
        return 0

    def scan(self, double now, stats, list episodes) -> list:
        """``LeafClocks.scan`` of the reference; ``stats``: the compiled core's TreeView (its
        ``placeable`` asked here, ``_placeable``)."""
        cdef TreeShape shape = stats.shape
        if shape is not self.bound:
            self._bind(shape)
        cdef Py_ssize_t i, q, r, k = shape.k, n = shape.n
        cdef double* usage = shape.work
        cdef double* share = usage + 3 * n * k
        cdef double* delta = share + n
        cdef double* fair = delta + n
        cdef double lo_r[64]
        cdef double ratio, x, target, min_share
        cdef bint below_min, below_fair, some
        cdef Py_ssize_t nlo
        cdef list queues = stats.tree.queues
        index = stats.tree.index
        out = []
        for i in range(self.n):
            q = self.at[i]
            below_min = False
            min_share = 0.0
            if self.t_min[i] < INFINITY:
                lo = queues[q].min
                if lo is not None:
                    # max over r with m_r > 0 of U_r / m_r (inf: none), as TreeView.min_ratio
                    nlo = min(len(lo), k, 64)
                    ratio, some = INFINITY, False
                    for r in range(nlo):
                        lo_r[r] = lo[r]
                        if lo_r[r] > 0:
                            x = usage[q * k + r] / lo_r[r]
                            if not some or x > ratio:
                                ratio, some = x, True
                    below_min = ratio < 1 - EPS
                    min_share = _frac(lo_r, shape.inverse, nlo)
            below_fair = self.t_fair[i] < INFINITY and share[q] < self.theta[i] * fair[q] - EPS
            if not (below_min or below_fair) and not self.episode[i]:
                continue
            if not (below_min or below_fair) or not _placeable(index, queues[q]):
                if self.episode[i]:             # the episode ends, both clocks with it
                    self.has_min[i] = self.has_fair[i] = self.episode[i] = 0
                    episodes.append((self.names[i], self.since[i], now))
                continue
            if not self.episode[i]:
                self.episode[i], self.since[i] = 1, now
            if below_min:
                if not self.has_min[i]:
                    self.has_min[i], self.since_min[i] = 1, now
            else:
                self.has_min[i] = 0
            if below_fair:
                if not self.has_fair[i]:
                    self.has_fair[i], self.since_fair[i] = 1, now
            else:
                self.has_fair[i] = 0
            target = -INFINITY
            if below_min and now - self.since_min[i] >= self.t_min[i] - EPS:
                x = delta[q] if delta[q] < min_share else min_share      # min(m, δ)
                if x > target:
                    target = x
            if below_fair and now - self.since_fair[i] >= self.t_fair[i] - EPS:
                if fair[q] > target:
                    target = fair[q]
            if target != -INFINITY and not (self.has_next[i] and now < self.next_search[i] - EPS):
                out.append((i, target))
        return out

    def searched(self, Py_ssize_t leaf, double until):
        self.has_next[leaf], self.next_search[leaf] = 1, until

    def wake_after(self, double now) -> float:
        cdef double best = INFINITY, t
        cdef Py_ssize_t i
        for i in range(self.n):
            if self.has_min[i]:
                t = self.since_min[i] + self.t_min[i]
                if now < t < best:
                    best = t
            if self.has_fair[i]:
                t = self.since_fair[i] + self.t_fair[i]
                if now < t < best:
                    best = t
            if self.episode[i] and self.has_next[i]:
                t = self.next_search[i]
                if now < t < best:
                    best = t
        return best

    def starved(self) -> dict:
        return {i: self.since[i] for i in range(self.n) if self.episode[i]}

    def end_all(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            self.episode[i] = 0

