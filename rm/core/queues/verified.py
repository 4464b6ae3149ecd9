"""Nodes held back by a cap, asked again all at once when the cap loosens.

Under YARN's caps (the Capacity Scheduler's user limits above all) many idle fragments are
held back at once: node m is kept on queue q (``q.blocked``) when q's caps refused one of
its candidates there, and each time q's caps may have loosened (a release or finish in q)
``KeyedTreeState.choose`` asks every such node again.  The answer is mostly "still no", and
the question is the same on every node: with A_q the apps q's caps admit now (the same set
on every node, ``QueueTreeState._within_caps``) and K_qm q's candidates on m, m passes for q
when K_qm ∩ A_q ≠ ∅.

So a node whose offer ended with nothing placed is *verified* on q when K_qm ≠ ∅ and
K_qm ∩ A_q = ∅, and kept here with K_qm instead of in ``q.blocked``.  Until the node
changes — a container on it ends, it is offered, or an app that fits it is asked for (which
always comes with an offer of it: the scheduler's fresh apps) — its candidates can only
shrink, to K_qm ∩ pending.  When q's caps loosen, its verified nodes are asked in one
question: the changed apps X_q = (∪K_qm \\ pending) ∪ A_q(∪K_qm); a node passes, or loses
a candidate, only when K_qm ∩ X_q ≠ ∅, and only such a node is offered, in node order
among the round's others, X_q asked again after every placement in q.  The decisions, and
which queues hold which nodes, are those of asking every node again one by one
(``KeyedTreeState.bulk = False``; tests/test_yarn_verified.py runs both).
"""

from __future__ import annotations

from bisect import bisect_right, insort
from heapq import heappop
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rayrm.rm.core.queues.accounts import QueueState
    from rayrm.rm.core.queues.state import QueueTreeState

INF = float("inf")


class VerifiedNodes:
    """The verified nodes of every queue of a tree, and the rounds of offers that ask them."""

    def __init__(self, tree: "QueueTreeState"):
        self.tree = tree
        self.sure: dict = {q: {} for q in tree.queues}      # queue -> {node: K_qm}
        self.cands: dict = {q: 0 for q in tree.queues}      # queue -> ⊇ ∪ K_qm
        #: queue -> its verified nodes sorted (and nodes since unverified, skipped when read)
        self.listed: dict = {q: [] for q in tree.queues}
        self.in_list: dict = {q: set() for q in tree.queues}
        self.sure_of: dict[int, set] = {}                   # node -> the queues it is verified on
        #: queues with verified nodes whose caps may have loosened since the last round
        self.released: set = set()
        self.renumbered = False                             # slots renumbered: every K_qm stale
        self.pos = -1                                       # the node on offer in a round
        self.changed: dict | None = None                    # queue -> [X_q, its first node], in a round

    def verify(self, m: int, fit: int) -> None:
        """Node m's offer ended in None with candidates ``fit``: on each queue holding it
        back whose caps refuse every candidate of its there, it becomes verified."""
        tree = self.tree
        for q in tree.queues:
            if m in q.blocked:
                k = fit & q.mask
                if k and not tree._within_caps(q, k):
                    q.blocked.discard(m)
                    sure, listed = self.sure[q], self.in_list[q]
                    if m not in listed:
                        if len(listed) > 2 * len(sure) + 32:
                            self.listed[q] = sorted(sure)
                            self.in_list[q] = listed = set(sure)
                        insort(self.listed[q], m)
                        listed.add(m)
                    sure[m] = k
                    self.cands[q] |= k
                    self.sure_of.setdefault(m, set()).add(q)

    def unsure(self, m: int) -> None:
        """Node m changed: back to ``blocked``, or, on a queue whose caps loosened since
        the last round, waiting to be asked (``_recheck``), as ``take_blocked`` left it."""
        recheck, released = self.tree._recheck, self.released
        for q in self.sure_of.pop(m):
            del self.sure[q][m]
            if q in released:
                recheck.setdefault(m, set()).add(q)
            else:
                q.blocked.add(m)

    def reask(self, m: int) -> None:
        """Node m is asked this round: it waits in ``_recheck`` for the loosened queues it
        is verified on, as ``take_blocked`` would have left it."""
        recheck, released = self.tree._recheck, self.released
        queues = self.sure_of[m]
        for q in [q for q in queues if q in released]:
            queues.discard(q)
            del self.sure[q][m]
            recheck.setdefault(m, set()).add(q)
        if not queues:
            del self.sure_of[m]

    # ----- a round of offers ---------------------------------------------------------

    def round(self, dirty: set, fresh: bool):
        """The nodes to offer, in node order: ``dirty`` and the loosened queues' verified
        nodes whose answer changed (each added to ``dirty``); all of those with ``fresh``."""
        released = self.released
        if released:
            for m in [m for m in dirty if m in self.sure_of]:
                self.reask(m)
            if fresh or self.renumbered:
                for q in released:
                    for m in list(self.sure[q]):
                        self.reask(m)
                        dirty.add(m)
        self.renumbered = False
        heap = sorted(dirty)
        self.pos, self.changed = -1, {}
        while True:
            nxt = self._next() if released else INF
            if heap and heap[0] < nxt:
                m = heappop(heap)
            elif nxt < INF:
                m = nxt
                self.reask(m)
                dirty.add(m)
            else:
                return
            self.pos = m
            yield m

    def _next(self) -> float:
        """The first verified node past the one on offer whose answer changed (INF: none)."""
        best, pos, changed = INF, self.pos, self.changed
        for q in self.released:
            sure = self.sure[q]
            if not sure:
                continue
            st = changed.get(q)
            if st is None:
                st = changed[q] = [self._changes(q), -1]
            if not st[0]:
                continue
            first = st[1]
            if first <= pos or (first < INF and first not in sure):
                first = st[1] = self._first(q, st[0])
            if first < best:
                best = first
        return best

    def _changes(self, q: "QueueState") -> int:
        """X_q: q's verified candidates no longer pending, and those its caps admit now."""
        cands = self.cands[q]
        pending = self.tree.index.pending_mask
        still = cands & pending
        return (cands & ~pending) | (self.tree._within_caps(q, still) if still else 0)

    def _first(self, q: "QueueState", changed: int) -> float:
        """q's first verified node past the one on offer with a candidate in ``changed``;
        a walk of them all also makes ``cands[q]`` their exact union."""
        listed, sure = self.listed[q], self.sure[q]
        start = bisect_right(listed, self.pos)
        union = 0
        for j in range(start, len(listed)):
            k = sure.get(listed[j])
            if k is not None:
                if k & changed:
                    return listed[j]
                union |= k
        if start == 0:
            self.cands[q] = union
        return INF

    def placed(self, path) -> None:
        """A placement in a round: the caps of the queues on its path changed."""
        if self.changed:
            for q in path:
                self.changed.pop(q, None)

    def close(self, stopped: int | None) -> None:
        """The round is over; ``stopped``: the node after whose offer nothing was pending
        (-1: nothing was), so that the loosened queues' verified nodes past it were not asked."""
        if stopped is not None:
            for q in self.released:
                for m in [m for m in self.sure[q] if m > stopped]:
                    if m in self.sure[q]:
                        self.reask(m)
        self.released = set()
        self.pos, self.changed = -1, None

    # ----- the tree rebuilt, slots renumbered ------------------------------------------

    def forget(self) -> None:
        """Every verified node back to ``blocked`` (the tree is rebuilt)."""
        for m, queues in self.sure_of.items():
            for q in queues:
                q.blocked.add(m)
        self.__init__(self.tree)

    def renumber(self) -> None:
        """The pending index renumbered its slots: every K_qm is stale.  The loosened
        queues' nodes are all asked at the next round, the others wait in ``blocked``."""
        released = self.released
        for m in list(self.sure_of):
            queues = self.sure_of[m]
            for q in [q for q in queues if q not in released]:
                queues.discard(q)
                del self.sure[q][m]
                q.blocked.add(m)
            if not queues:
                del self.sure_of[m]
        for q in self.tree.queues:
            if q not in released:
                self.cands[q], self.listed[q], self.in_list[q] = 0, [], set()
        self.renumbered = True
