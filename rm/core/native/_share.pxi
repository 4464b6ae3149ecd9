# The share of a vector, included by the compiled modules that measure queues' usage
# (_fairshare.pyx, _victims.pyx): the reference is rm/core/queues/treeview.py's ``_measure``.

cdef inline double _frac(const double* v, const double* inverse, Py_ssize_t k) noexcept:
    """max_r v_r · inverse_r, 0 for k = 0 (``_measure``: the first of equals kept, as
    Python's ``max``)."""
    cdef double best = 0.0, t
    cdef Py_ssize_t r
    for r in range(k):
        t = v[r] * inverse[r]
        if r == 0 or t > best:
            best = t
    return best
