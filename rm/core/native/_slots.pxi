# Slots read and written at their offsets, included by the compiled modules that walk the
# cluster's accounting (_offer.pyx).  An instance of a class with ``__slots__`` (and no
# ``__dict__``) keeps each slot at a fixed offset, which the slot's member descriptor holds;
# Python's attribute access looks that descriptor up by name on every read and write, this
# reads the offset once per class.  The callers read so only instances of exactly the class
# whose offsets they hold, anything else by name.

from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF

cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member


cdef Py_ssize_t slot_offset(type cls, str name) except -1:
    """Where instances of ``cls`` keep the slot ``name``."""
    descr = cls.__dict__[name]
    if type(descr).__name__ != "member_descriptor":
        raise TypeError(f"{cls.__name__}.{name} is not a slot")
    return (<PyMemberDescrObject *> <PyObject *> descr).d_member.offset


cdef inline object get_slot(object obj, Py_ssize_t offset, str name):
    """The slot at ``offset`` of ``obj`` (AttributeError when unset, as Python's read)."""
    cdef PyObject *value = (<PyObject **> (<char *> <PyObject *> obj + offset))[0]
    if value is NULL:
        raise AttributeError(name)
    return <object> value


cdef inline int set_slot(object obj, Py_ssize_t offset, object value) except -1:
    """The slot at ``offset`` of ``obj`` set to ``value`` (its old value released)."""
    cdef PyObject **at = <PyObject **> (<char *> <PyObject *> obj + offset)
    cdef PyObject *old = at[0]
    Py_INCREF(value)
    at[0] = <PyObject *> value
    Py_XDECREF(old)
    return 0


cdef inline object slot_of(object obj, type cls, Py_ssize_t offset, str name):
    """``obj.<name>``: at its slot's offset when ``obj`` is exactly a ``cls``, else by name."""
    if type(obj) is cls:
        return get_slot(obj, offset, name)
    return getattr(obj, name)


cdef inline int set_slot_of(object obj, type cls, Py_ssize_t offset, str name, object value) except -1:
    """``obj.<name> = value``: at its slot's offset when ``obj`` is exactly a ``cls``, else by name."""
    if type(obj) is cls:
        return set_slot(obj, offset, value)
    setattr(obj, name, value)
    return 0
