# The compiled event queue's declarations (rm/core/native/_eventheap.pyx), for the
# compiled modules that pop and push it without a Python call (_simloop.pyx).

from cpython.ref cimport PyObject

cdef struct Event:
    double t
    long priority
    unsigned long long seq
    PyObject *payload


cdef class EventHeap:
    cdef Event *items
    cdef Py_ssize_t n, cap
    cdef unsigned long long seq

    cpdef void push(self, double t, long priority, object payload) except *
    cpdef tuple pop(self)
    cpdef double first_time(self)
    cdef object pop_payload(self)
