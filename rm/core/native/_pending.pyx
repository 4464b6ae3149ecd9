# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled piece of the pending index (rm/core/pending.py, the Python reference):
``PendingIndex._set_bits``'s two numpy fancy-index writes — an app's bit in its column of
every eligible node's row, and those rows' stale flags — as one loop over the nodes.

An unconstrained app is eligible on every node, so on a 1,000-node cluster each arrival
writes 1,000 rows twice; numpy's fancy indexing pays more per element than the loop.
"""


def set_bits(unsigned char[:, ::1] bits, unsigned char[::1] stale, Py_ssize_t column,
             unsigned char bit, const Py_ssize_t[::1] nodes, bint on):
    """bits[m, column] |= bit (``on``) or &= ~bit, and stale[m] = 1, for every m of nodes."""
    cdef Py_ssize_t j, m
    cdef unsigned char clear = ~bit
    for j in range(nodes.shape[0]):
        m = nodes[j]
        if on:
            bits[m, column] |= bit
        else:
            bits[m, column] &= clear
        stale[m] = 1
