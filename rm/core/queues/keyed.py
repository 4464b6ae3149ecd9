"""The tree's descent with another order among siblings: YARN's schedulers' common part.

``QueueTreeState._scan`` picks, at a queue on offer, the active child of least
(needy, ρ, name) — hierarchical TSF.  YARN's Fair and Capacity schedulers keep the descent,
the candidates and the caps (a child is active when its subtree has a pending task that
fits the node within every cap on the way) and change only which active child comes first:
each states it as ``child_key(parent, child)``, least first.  Every queue keeps its usage
vector, which both orders read.

A node a cap held back is offered again when the cap may have loosened; ``choose`` first
re-tests it against the loosened caps alone, and ``VerifiedNodes`` (``verified``) asks the
nodes whose answer cannot have changed all at once.
"""

from __future__ import annotations

from rayrm.rm.core.queues.accounts import QueueState
from rayrm.rm.core.queues.state import QueueTreeState
from rayrm.rm.core.queues.verified import VerifiedNodes


class KeyedTreeState(QueueTreeState):
    """``QueueTreeState`` whose siblings are ordered by ``child_key``."""

    #: ask a loosened queue's verified nodes at once (``verified``); False: one by one
    bulk = True

    def __init__(self, tree, policies, default, cluster, index, naive=False):
        super().__init__(tree, policies, default, cluster, index, naive)
        for q in self.queues:              # no app yet: usage starts at 0 everywhere
            q.track = True
        self._recheck: dict[int, set] = {}  # node -> the queues whose caps may have loosened on it
        #: node -> (its free space, its candidates) when an offer of it last ended in None
        self._held: dict[int, tuple] = {}
        self.verified = VerifiedNodes(self)

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
                within = self._within_caps(c, cf)
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
        alone (``choose``): one release frees room for about one container, and a full offer
        of every fragment after every release would dominate the run.  The verified nodes
        wait for the round (``offer_round``), which asks them all at once."""
        out: list[int] = []
        recheck = self._recheck
        for q in queues:
            if q.blocked:
                for m in q.blocked:
                    recheck.setdefault(m, set()).add(q)
                out.extend(q.blocked)
                q.blocked = set()
            if self.verified.sure[q]:
                self.verified.released.add(q)
        return out

    def choose(self, m: int, free, order: list):
        """``QueueTreeState.choose``, but a node offered again only because caps loosened —
        its free space and candidates as when its last offer ended — whose loosened caps
        still refuse every candidate of theirs is answered None at once, and stays held
        back: nothing else about it changed, so a full offer would end in None too."""
        verified = self.verified
        if m in verified.sure_of:
            verified.unsure(m)
        queues = self._recheck.pop(m, None)
        fit = self.index.fits_mask(m, free)
        held = self._held.get(m)
        if queues is not None and held is not None and held[0] == tuple(free) and not fit & ~held[1]:
            # same room, no new candidate: only these queues' caps changed
            if not any(fit & q.mask and self._within_caps(q, fit & q.mask) for q in queues):
                for q in queues:
                    if fit & q.mask:
                        q.blocked.add(m)
                if self.bulk:
                    verified.verify(m, fit)
                return None
        app = super().choose(m, free, order)
        if app is None:
            self._held[m] = (tuple(free), fit)
            if self.bulk:
                verified.verify(m, fit)
        return app

    # ----- rounds of offers -------------------------------------------------------------

    @property
    def deferred(self) -> bool:
        return bool(self.verified.released)

    def offer_round(self, dirty: set, fresh: bool):
        return self.verified.round(dirty, fresh)

    def close_round(self, stopped: int | None) -> None:
        self.verified.close(stopped)

    def node_changed(self, m: int) -> None:
        if m in self.verified.sure_of:
            self.verified.unsure(m)

    def allocated(self, app) -> None:
        super().allocated(app)
        self.verified.placed(self.members[app.app_id].path)

    def rebuild(self):
        self.verified.forget()
        return super().rebuild()

    def attach(self, app, leaf) -> None:
        if self.index.generation != self._gen:
            self.verified.renumber()
        super().attach(app, leaf)
