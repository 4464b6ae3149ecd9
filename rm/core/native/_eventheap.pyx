# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled event queue: ``rayrm.rm.sim.events.EventHeap`` (the Python reference) in a
C array of (t, priority, sequence, payload) structs, a binary min-heap on that key.

The payload's reference is owned by the heap from push to pop (Py_INCREF / Py_DECREF), and
released in ``__dealloc__`` for events never popped.
"""

from cpython.mem cimport PyMem_Malloc, PyMem_Realloc, PyMem_Free
from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF


cdef inline bint before(Event *a, Event *b) noexcept nogil:
    """(t, priority, seq) of a < that of b; seq is unique, so the order is total."""
    if a.t != b.t:
        return a.t < b.t
    if a.priority != b.priority:
        return a.priority < b.priority
    return a.seq < b.seq


cdef class EventHeap:
    """A min-heap of events keyed (t, priority, push order); its fields are declared in
    _eventheap.pxd."""

    def __cinit__(self):
        self.cap = 1024
        self.n = 0
        self.seq = 0
        self.items = <Event *> PyMem_Malloc(self.cap * sizeof(Event))
        if self.items == NULL:
            raise MemoryError()

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.items != NULL:
            for i in range(self.n):
                Py_DECREF(<object> self.items[i].payload)
            PyMem_Free(self.items)

    cpdef void push(self, double t, long priority, object payload) except *:
        cdef Event *grown
        cdef Event e
        cdef Py_ssize_t i, parent
        if self.n == self.cap:
            grown = <Event *> PyMem_Realloc(self.items, 2 * self.cap * sizeof(Event))
            if grown == NULL:
                raise MemoryError()
            self.items, self.cap = grown, 2 * self.cap
        Py_INCREF(payload)
        e.t, e.priority, e.seq, e.payload = t, priority, self.seq, <PyObject *> payload
        self.seq += 1
        i = self.n
        self.n += 1
        while i > 0:                        # sift up
            parent = (i - 1) >> 1
            if not before(&e, &self.items[parent]):
                break
            self.items[i] = self.items[parent]
            i = parent
        self.items[i] = e

    cpdef tuple pop(self):
        """The earliest event as (t, priority, payload); IndexError when empty."""
        cdef Event top
        if self.n == 0:
            raise IndexError("pop from an empty event heap")
        top = self.items[0]
        payload = self.pop_payload()
        return (top.t, top.priority, payload)

    cdef object pop_payload(self):
        """Remove the earliest event (the caller has seen there is one); its payload."""
        cdef Event top, last
        cdef Py_ssize_t i, child, n
        top = self.items[0]
        self.n -= 1
        n = self.n
        if n:
            last = self.items[n]
            i = 0
            while True:                     # sift down
                child = 2 * i + 1
                if child >= n:
                    break
                if child + 1 < n and before(&self.items[child + 1], &self.items[child]):
                    child += 1
                if not before(&self.items[child], &last):
                    break
                self.items[i] = self.items[child]
                i = child
            self.items[i] = last
        payload = <object> top.payload      # a new reference; the heap's own is dropped
        Py_DECREF(payload)
        return payload

    cpdef double first_time(self):
        """The earliest event's time; inf when empty."""
        return self.items[0].t if self.n else float("inf")

    def __len__(self):
        return self.n
