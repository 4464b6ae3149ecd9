# The compiled offer's declarations (rm/core/native/_offer.pyx), for the compiled simulator
# loop (_simloop.pyx) that runs a scheduler's rounds and releases without a Python call.

cdef class Core:
    cdef object sched, cluster, index, counter
    cdef dict containers, holders
    cdef bint count_per_node, inline_key, best_fit, own_allocate, own_release, direct

cdef list schedule_in(Core core)
cdef object release_in(Core core, object container_id)
