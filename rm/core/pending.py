"""An index of pending apps, answering one question fast: which of them fit here?

The offer walk (rm/core/scheduler.py) finds the first app that fits within a few
steps, but when the front of the pending list is apps that cannot use a node,
finding the one that can — or proving that none can — means walking the whole
list.  This index answers with a handful of operations on Python integers used as
bitsets over app *slots*:

    fit(node m, free F) = pending ∧ eligible_m ∧ ⋀_r {slots with d_r ≤ F_r + EPS}

``eligible_m`` is kept per node, as a row of a nodes × slots bit matrix (numpy, so
that an arriving app sets its bit on every eligible node in one operation) read
into a Python integer when a node's row has changed; for each resource dimension
the distinct demand values are kept sorted with the prefix unions of their slots,
so the last term is one bisection and one lookup per dimension.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from types import MethodType
from typing import Iterator

import numpy as np

from rayrm.rm.core.model import EPS
from rayrm.rm.core.native import compiled


class _Dimension:
    """Sorted distinct demand values of one dimension, with prefix unions of their slots."""

    __slots__ = ("values", "prefix")

    def __init__(self):
        self.values: list[float] = []
        self.prefix: list[int] = []      # prefix[k]: slots whose demand is <= values[k]

    def add(self, value: float, bit: int, native: bool = False) -> None:
        """Slot ``bit`` demands ``value``: it joins the union of every value >= it (with
        ``native``, the loop compiled, ``_pending.or_from``)."""
        k = bisect_left(self.values, value)
        if k == len(self.values) or self.values[k] != value:
            self.values.insert(k, value)
            self.prefix.insert(k, self.prefix[k - 1] if k else 0)
        prefix = self.prefix
        if native:
            compiled("_pending").or_from(prefix, k, bit)
            return
        for j in range(k, len(prefix)):
            prefix[j] |= bit

    def at_most(self, limit: float) -> int:
        """Slots whose demand is <= limit."""
        k = bisect_right(self.values, limit)
        return self.prefix[k - 1] if k else 0


class PendingIndex:
    """Slots are never reused until a compaction: removing an app only clears its pending
    bit (its other bits are masked by it), so an app costs one pass over its eligible
    nodes when it arrives and nothing when it leaves; once dead slots outnumber live
    ones (and 1,024), every bitset is rebuilt over the live apps alone."""

    def __init__(self, width: int, n_nodes: int, native: bool = False):
        self.width = width
        #: write eligibility bits with the compiled loop (rayrm.rm.core.native._pending)
        self.native = native
        self._n_nodes = n_nodes
        #: how many times slots were renumbered (a compaction): a bitset of slots kept
        #: outside (the queue tree's) is stale when this has moved on
        self.generation = 0
        self._reset()
        self._bind()

    def _bind(self) -> None:
        """Under the compiled core, ``fits_mask`` is its compiled twin (the same bitset)."""
        if self.native:
            self.fits_mask = MethodType(compiled("_pending").fits_mask, self)

    def _reset(self) -> None:
        self._dims = [_Dimension() for _ in range(self.width)]
        # node -> slots that may use it: bit (slot & 7) of byte (slot >> 3) of row node
        self._bits = np.zeros((self._n_nodes, 128), dtype=np.uint8)
        self._elig: list[int] = [0] * self._n_nodes   # the rows as integers, when fresh
        self._set_stale(bytearray(self._n_nodes))
        self._pending = 0                             # slots with tasks waiting
        self._slot: dict[str, int] = {}
        self._ids: list[str | None] = []              # slot -> app id (None: removed)
        self._items: list = []                        # slot -> what ``fitting`` names it by
        self._demand: list[tuple] = []                # slot -> demand vector
        self._eligible: list[bytes] = []              # slot -> its eligibility, a byte a node
        self._dead = 0

    def _set_stale(self, flags: bytearray) -> None:
        """Rows whose integer is out of date: read one flag at a time as bytes (a numpy
        scalar read costs several times more), set many at once through a numpy view."""
        self._stale_flags = flags
        self._stale = np.frombuffer(flags, dtype=bool)

    def __getstate__(self) -> dict:
        # ``_stale`` is a view of ``_stale_flags``; pickled, it would come back as a copy of
        # its own, and rows marked stale through it would never be re-read: a restored RM
        # would miss apps that arrived after its snapshot on every node they made stale
        state = self.__dict__.copy()
        del state["_stale"]
        state.pop("fits_mask", None)        # bound again on restore (_bind)
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("native", False)
        self.__dict__.update(state)
        self._set_stale(self._stale_flags)
        self._bind()

    def add(self, app_id: str, demand: tuple, eligible: bytearray, item=None) -> None:
        """A new app; ``fitting`` names it by ``item`` (default: its id)."""
        if self._dead > max(1024, len(self._slot)):
            self._compact()
        slot = len(self._ids)
        self._ids.append(app_id)
        self._items.append(app_id if item is None else item)
        self._demand.append(tuple(demand))
        self._eligible.append(b"")
        self._slot[app_id] = slot
        bit = 1 << slot
        for dim, value in zip(self._dims, demand):
            dim.add(value, bit, self.native)
        self._grow(len(eligible))
        self._set_bits(slot, eligible, True)        # a new slot has no bit to clear
        self._eligible[slot] = eligible

    def _compact(self) -> None:
        self.generation += 1
        live = [(a, self._items[s], self._demand[s], self._eligible[s], bool(self._pending >> s & 1))
                for a, s in self._slot.items()]
        self._reset()
        for app_id, item, demand, eligible, pending in live:
            slot = len(self._ids)
            self._ids.append(app_id)
            self._items.append(item)
            self._demand.append(demand)
            self._eligible.append(eligible)
            self._slot[app_id] = slot
            bit = 1 << slot
            for dim, value in zip(self._dims, demand):
                dim.add(value, bit, self.native)
            self._set_bits(slot, eligible, True)
            if pending:
                self._pending |= bit

    def set_eligible(self, app_id: str, eligible: bytes) -> None:
        """The app may now use the nodes of ``eligible`` (a byte a node, nonzero: may)."""
        slot = self._slot[app_id]
        self._grow(len(eligible))
        self._set_bits(slot, self._eligible[slot], False)
        self._set_bits(slot, eligible, True)
        self._eligible[slot] = eligible

    def _grow(self, n_nodes: int) -> None:
        """Rows for nodes that joined since (``n_nodes`` in all, when more)."""
        if n_nodes > self._n_nodes:
            grow = n_nodes - self._n_nodes
            self._bits = np.vstack([self._bits, np.zeros((grow, self._bits.shape[1]), dtype=np.uint8)])
            self._elig.extend([0] * grow)
            self._set_stale(self._stale_flags + bytearray(grow))
            self._n_nodes = n_nodes

    def _set_bits(self, slot: int, eligible: bytes, on: bool) -> None:
        """Set (``on``) or clear the slot's bit in the row of every node of ``eligible``."""
        column, bit = slot >> 3, 1 << (slot & 7)
        if column >= self._bits.shape[1]:
            wider = np.zeros((self._n_nodes, max(2 * self._bits.shape[1], column + 1)), dtype=np.uint8)
            wider[:, :self._bits.shape[1]] = self._bits
            self._bits = wider
        if self.native:
            compiled("_pending").set_bits(self._bits, self._stale_flags, column, bit, eligible, on)
            return
        nodes, bit = np.flatnonzero(np.frombuffer(eligible, dtype=np.uint8)), np.uint8(bit)
        if on:
            self._bits[nodes, column] |= bit
        else:
            self._bits[nodes, column] &= ~bit
        self._stale[nodes] = True

    def remove(self, app_id: str) -> None:
        slot = self._slot.pop(app_id)
        self._pending &= ~(1 << slot)
        self._ids[slot] = self._items[slot] = None
        self._dead += 1

    def set_pending(self, app_id: str, pending: bool) -> None:
        bit = 1 << self._slot[app_id]
        self._pending = self._pending | bit if pending else self._pending & ~bit

    def _mask(self, node: int, free) -> int:
        # by demand first: a full node often fits none, and then its row need not be read
        cand = self._under(self._pending, free)
        if not cand:
            return 0
        if self._stale_flags[node]:
            self._elig[node] = int.from_bytes(self._bits[node], "little")
            self._stale_flags[node] = 0
        return cand & self._elig[node]

    def pending_within(self, vector) -> int:
        """The pending apps whose task fits under ``vector`` (a queue's headroom), whatever
        node they may use: for a node's candidates ``c`` (a subset of ``fits_mask(m, F)``),
        ``c & pending_within(v)`` is ``c & fits_mask(m, v)``, the same for every node."""
        return self._under(self._pending, vector)

    def _under(self, cand: int, vector) -> int:
        """The apps of ``cand`` whose task fits under ``vector``: per dimension, those whose
        demand is at most its value (``_Dimension.at_most``, inline)."""
        for dim, f in zip(self._dims, vector):
            if not cand:
                break
            k = bisect_right(dim.values, f + EPS)
            cand &= dim.prefix[k - 1] if k else 0
        return cand

    def bit(self, app_id: str) -> int:
        """The app's slot as a one-bit integer, valid until the next compaction."""
        return 1 << self._slot[app_id]


    @property
    def pending_mask(self) -> int:
        """The bitset of apps with a task pending (on any node)."""
        return self._pending

    def item(self, bit: int):
        """What ``add`` named the app of a one-bit integer."""
        return self._items[bit.bit_length() - 1]

    def items_in(self, mask: int) -> Iterator:
        """What ``add`` named the apps of ``mask``'s bits, lowest bit first."""
        items = self._items
        while mask:
            low = mask & -mask
            yield items[low.bit_length() - 1]
            mask ^= low

    #: fits_mask(node, vector): the bitset of pending apps that may use ``node`` and whose
    #: task fits ``vector`` (a node's free resources, or a queue's headroom)
    fits_mask = _mask

    def any_fits(self, node: int, free) -> bool:
        """Is there a pending app that may use ``node`` and whose task fits ``free``?"""
        return bool(self._mask(node, free))

    def fitting(self, node: int, free) -> list:
        """The pending apps that may use ``node`` and whose task fits ``free`` (any order),
        each as ``add`` named it."""
        cand = self._mask(node, free)
        out = []
        ids = self._items
        while cand:
            low = cand & -cand
            out.append(ids[low.bit_length() - 1])
            cand ^= low
        return out
