# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled water-filling (rm/core/queues/fairshare.py, the Python reference):
``fair_shares`` on C doubles, the same operations in the same order, so every share is the
same float.  Preemption's rules solve it at each evaluation for every parent with active
children (rm/core/queues/preemption.py), where the Python version's per-term calls cost most.

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


def fair_shares(weights, lo, hi, double total) -> list:
    """Each schedulable's fair share s_i(R) of ``total`` (fairshare.fair_shares)."""
    cdef Py_ssize_t n = len(weights), i
    cdef double r, t
    if n == 0:
        return []
    cdef double* buf = <double*>malloc(5 * n * sizeof(double))
    if buf == NULL:
        raise MemoryError()
    cdef double* w = buf
    cdef double* a = buf + n
    cdef double* b = buf + 2 * n
    out = []
    try:
        for i in range(n):
            w[i] = weights[i]
            a[i] = lo[i]
            b[i] = hi[i]
        r = _ratio(w, a, b, n, total, buf + 3 * n)
        for i in range(n):
            if r < INFINITY:
                out.append(_clamp(r, w[i], a[i], b[i]))
            else:
                t = a[i]
                if 0.0 > t:
                    t = 0.0
                if b[i] < t:
                    t = b[i]
                out.append(t)
    finally:
        free(buf)
    return out
