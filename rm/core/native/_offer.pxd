# The compiled offer's declarations (rm/core/native/_offer.pyx), for the compiled simulator
# loop (_simloop.pyx) that runs a scheduler's rounds and releases without a Python call, and
# for the queue tree's round (_tree.pyx), which tests fresh apps' fits as the flat one does.

cdef class Core:
    cdef object sched, cluster, index, counter
    cdef dict containers, holders
    cdef bint count_per_node, inline_key, best_fit, own_allocate, own_release, direct
    cdef object tree_walk               # a queue tree's own reads (_tree.pyx), when asked

cdef list schedule_in(Core core)
cdef object release_in(Core core, object container_id)
cdef object place_in(Core core, app, node, list order)

cdef class Candidates:
    cdef list held                      # the eligibility vectors pointed at, kept alive
    cdef Py_ssize_t k
    cdef const unsigned char **elig
    cdef Py_ssize_t *size
    cdef Py_ssize_t *nd
    cdef double *demand                 # row j: app j's d_r, MAX_DIMS apart
    cdef void release(self)
    cdef int read(self, list entries) except -1
    cdef int read_apps(self, list apps) except -1
    cdef bint eligible(self, Py_ssize_t m)
    cdef list free_of(self, list nodes, Py_ssize_t m, set dirty, double *F)
    cdef bint any_fits(self, Py_ssize_t m, double *F, Py_ssize_t w)
