"""The tree's descent with another order among siblings: YARN's schedulers' common part.

``QueueTreeState._scan`` picks, at a queue on offer, the active child of least
(needy, ρ, name) — hierarchical TSF.  YARN's Fair and Capacity schedulers keep the descent,
the candidates and the caps (a child is active when its subtree has a pending task that
fits the node within every cap on the way) and change only which active child comes first:
each states it as ``child_key(parent, child)``, least first.  Every queue keeps its usage
vector, which both orders read.
"""

from __future__ import annotations

from rayrm.rm.core.queues.state import QueueState, QueueTreeState


class KeyedTreeState(QueueTreeState):
    """``QueueTreeState`` whose siblings are ordered by ``child_key``."""

    def __init__(self, tree, policies, default, cluster, index, naive=False):
        super().__init__(tree, policies, default, cluster, index, naive)
        for q in self.queues:              # no app yet: usage starts at 0 everywhere
            q.track = True

    def child_key(self, parent: QueueState, child: QueueState) -> tuple:
        raise NotImplementedError

    def _scan(self, q: QueueState, fit: int, m: int, memo: dict) -> tuple | None:
        """(q's active child on node m of least ``child_key``, its candidates, None, None),
        None when no child is active; kept in ``memo`` for the descent."""
        best = best_cf = best_key = None
        for c in q.children:
            cf = fit & c.mask
            if not cf:
                continue
            if c.capped:
                within = self._within_caps(c, cf, m)
                if within != cf:
                    c.blocked.add(m)
                cf = within
                if not cf:
                    continue
            if c.children and (memo[c] if c in memo else self._scan(c, cf, m, memo)) is None:
                continue
            key = self.child_key(q, c)
            if best is None or key < best_key:
                best, best_cf, best_key = c, cf, key
        found = None if best is None else (best, best_cf, None, None)
        memo[q] = found
        return found
