"""The tree's descent with another order among siblings: YARN's schedulers' common part.

``QueueTreeState._scan`` picks, at a queue on offer, the active child of least
(needy, ρ, name) — hierarchical TSF.  YARN's Fair and Capacity schedulers keep the descent,
the candidates and the caps (a child is active when its subtree has a pending task that
fits the node within every cap on the way) and change only which active child comes first:
each states it as ``child_key(parent, child)``, least first.  Every queue keeps its usage
vector, which both orders read.
"""

from __future__ import annotations

from rayrm.rm.core.queues.accounts import QueueState
from rayrm.rm.core.queues.state import QueueTreeState


class KeyedTreeState(QueueTreeState):
    """``QueueTreeState`` whose siblings are ordered by ``child_key``."""

    def __init__(self, tree, policies, default, cluster, index, naive=False):
        super().__init__(tree, policies, default, cluster, index, naive)
        for q in self.queues:              # no app yet: usage starts at 0 everywhere
            q.track = True
        self._recheck: dict[int, set] = {}  # node -> the queues whose caps may have loosened on it
        #: node -> (its free space, its candidates) when an offer of it last ended in None
        self._held: dict[int, tuple] = {}

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

    def take_blocked(self, queues) -> list[int]:
        """The nodes a cap of one of ``queues`` kept from a candidate, to be offered again
        now that the cap may have loosened.  Each is first re-tested against those caps
        alone (``choose``): under YARN's user limits many idle fragments are held back at
        once, one release frees room for about one container, and a full offer of every
        fragment after every release would dominate the run."""
        out: list[int] = []
        recheck = self._recheck
        for q in queues:
            if q.blocked:
                for m in q.blocked:
                    recheck.setdefault(m, set()).add(q)
                out.extend(q.blocked)
                q.blocked = set()
        return out

    def choose(self, m: int, free, order: list):
        """``QueueTreeState.choose``, but a node offered again only because caps loosened —
        its free space and candidates as when its last offer ended — whose loosened caps
        still refuse every candidate of theirs is answered None at once, and stays held
        back: nothing else about it changed, so a full offer would end in None too."""
        queues = self._recheck.pop(m, None)
        fit = self.index.fits_mask(m, free)
        held = self._held.get(m)
        if queues is not None and held is not None and held[0] == tuple(free) and not fit & ~held[1]:
            # same room, no new candidate: only these queues' caps changed
            if not any(fit & q.mask and self._within_caps(q, fit & q.mask, m) for q in queues):
                for q in queues:
                    if fit & q.mask:
                        q.blocked.add(m)
                return None
        app = super().choose(m, free, order)
        if app is None:
            self._held[m] = (tuple(free), fit)
        return app
