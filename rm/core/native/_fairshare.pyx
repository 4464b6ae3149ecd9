# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled water-filling (rm/core/queues/fairshare.py, the Python reference):
``fair_shares`` on C doubles, the same operations in the same order, so every share is the
same float; and ``TreeShape.view``, preemption's view of the tree at an evaluation (u, δ and
F of every queue: rm/core/queues/treeview.py, the Python reference), which the rules ask for
every half second of trace time.

Python's ``max(x, y)`` keeps x unless y > x and ``min(x, y)`` keeps x unless y < x; the
clamps below are written that way.  ``sum`` of floats adds them left to right from 0.0.
"""

from libc.math cimport INFINITY
from libc.stdlib cimport free, malloc, qsort


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

    def view(self, list queues) -> tuple:
        """({path: u_i}, {path: δ_i}) in queue order and {name: F} in ``fill_names`` order,
        for the QueueStates ``queues`` (the tree's, root first; their ``usage`` and ``pend``)."""
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
        cdef dict by_path = {}, demand_by_path = {}, fair_by_name = {}
        for i in range(n):
            by_path[self.paths[i]] = share[i]
            demand_by_path[self.paths[i]] = delta[i]
        for i in range(n):
            fair_by_name[self.fill_names[i]] = fair[self.order[i]]
        return by_path, demand_by_path, fair_by_name

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
