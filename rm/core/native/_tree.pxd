# The compiled queue tree's declarations (rm/core/native/_tree.pyx), for the compiled simulator
# loop (_simloop.pyx) that runs a tree's rounds and releases without a Python call.

from ._offer cimport Core

cdef list tree_schedule(Core core)
cdef object tree_release(Core core, object container_id)
