# The fit test in C doubles, included by the compiled modules that offer nodes (_offer.pyx,
# _tree.pyx): the reference is rm/core/scheduler.py's ``any_fits``.  It needs ``EPS`` (the
# model's, as a C double) and PyBytes_AS_STRING / PyBytes_GET_SIZE, PyList_GET_ITEM and
# PyTuple_GET_ITEM / PyTuple_GET_SIZE cimported by the including module.

#: the widest vector walked in C; a wider one (never met: real plus virtual dimensions)
#: takes the Python reference
cdef enum:
    MAX_DIMS = 64


cdef inline void load(list free, double *F, Py_ssize_t w):
    cdef Py_ssize_t r
    for r in range(w):
        F[r] = <double> (<object> PyList_GET_ITEM(free, r))


cdef inline bint fits_vectors(object elig, tuple demand, Py_ssize_t m, double *F, Py_ssize_t w) except -1:
    """An app that may use ``elig``'s nodes with tasks of ``demand`` may use node m and its
    task fits F: eligible[m] and no d_r > F_r + EPS."""
    cdef Py_ssize_t r, nd
    if type(elig) is bytes and m < PyBytes_GET_SIZE(elig):
        if not PyBytes_AS_STRING(elig)[m]:
            return False
    elif not elig[m]:
        return False
    nd = PyTuple_GET_SIZE(demand)
    if nd > w:
        nd = w
    for r in range(nd):
        if <double> (<object> PyTuple_GET_ITEM(demand, r)) > F[r] + EPS:
            return False
    return True


cdef inline bint fits(object app, Py_ssize_t m, double *F, Py_ssize_t w) except -1:
    """The app may use node m and its task fits F (``fits_vectors``)."""
    return fits_vectors(app.eligible, app.demand, m, F, w)
