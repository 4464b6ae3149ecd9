"""A vector index of pending apps, answering one question fast: could anything fit here?

The offer walk (rm/scheduler.py) finds the first app that fits within a few
steps, but proving that *nothing else* fits a node's leftovers means walking the
whole pending list.  This index keeps, per app slot, its demand row, a pending
flag and an eligibility column per node, so the proof is three vector operations.
"""

from __future__ import annotations

import numpy as np

from rm.model import EPS


class PendingIndex:
    def __init__(self, width: int, n_nodes: int):
        self.width = width
        self._demand = np.zeros((width, 64))     # one row per dimension, one column per slot
        self._pending = np.zeros(64, dtype=bool)
        self._elig = np.zeros((max(n_nodes, 1), 64), dtype=bool)
        self._slot: dict[str, int] = {}
        self._free_slots: list[int] = []
        self._used = 0          # slots [0, used) have been handed out
        self._by_slot: dict[int, str] | None = None

    def _grow(self, nodes: int, slots: int) -> None:
        rows, cols = self._elig.shape
        if nodes > rows or slots > cols:
            new_rows, new_cols = max(rows, nodes, 2 * rows if nodes > rows else rows), \
                max(cols, 2 * cols if slots > cols else cols)
            elig = np.zeros((new_rows, new_cols), dtype=bool)
            elig[:rows, :cols] = self._elig
            self._elig = elig
        if slots > len(self._pending):
            cap = self._elig.shape[1]
            demand = np.zeros((self.width, cap))
            demand[:, :len(self._pending)] = self._demand
            pending = np.zeros(cap, dtype=bool)
            pending[:len(self._pending)] = self._pending
            self._demand, self._pending = demand, pending

    def add(self, app_id: str, demand: tuple, eligible: bytearray) -> None:
        slot = self._free_slots.pop() if self._free_slots else self._used
        if slot == self._used:
            self._used += 1
        self._grow(len(eligible), self._used)
        self._slot[app_id] = slot
        self._by_slot = None
        self._demand[:, slot] = demand
        self.set_eligible(app_id, eligible)

    def set_eligible(self, app_id: str, eligible: bytearray) -> None:
        self._grow(len(eligible), self._used)
        col = np.frombuffer(bytes(eligible), dtype=np.uint8).astype(bool)
        slot = self._slot[app_id]
        self._elig[:len(col), slot] = col
        self._elig[len(col):, slot] = False

    def remove(self, app_id: str) -> None:
        slot = self._slot.pop(app_id)
        self._by_slot = None
        self._pending[slot] = False
        self._elig[:, slot] = False
        self._free_slots.append(slot)

    def set_pending(self, app_id: str, pending: bool) -> None:
        self._pending[self._slot[app_id]] = pending

    def _mask(self, node: int, free) -> np.ndarray:
        n = self._used
        cand = self._pending[:n] & self._elig[node, :n]
        demand = self._demand
        for r, f in enumerate(free):
            cand &= demand[r, :n] <= f + EPS
        return cand

    def any_fits(self, node: int, free) -> bool:
        """Is there a pending app that may use ``node`` and whose task fits ``free``?"""
        return bool(self._mask(node, free).any())

    def fitting(self, node: int, free) -> list[str]:
        """The pending apps that may use ``node`` and whose task fits ``free`` (any order)."""
        slots = np.flatnonzero(self._mask(node, free))
        if not len(slots):
            return []
        by_slot = self._apps_by_slot()
        return [by_slot[s] for s in slots]

    def _apps_by_slot(self) -> dict[int, str]:
        if self._by_slot is None:
            self._by_slot = {s: a for a, s in self._slot.items()}
        return self._by_slot
