"""One queue's accounting (``QueueState``) and an app's place in the tree (``Member``): the
records ``QueueTreeState`` (rm/core/queues/state.py) keeps and offers by."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rayrm.rm.core.queues.tree import QueueSpec
from rayrm.rm.core.shares import ShareKind

if TYPE_CHECKING:
    from rayrm.rm.core.policies import Policy

INF = math.inf


class QueueState:
    """One queue's accounting: its aggregate share, usage vector and caps."""

    __slots__ = ("spec", "name", "children", "weight", "policy", "agg", "usage", "running_apps", "mask",
                 "waiting", "min", "max", "max_apps", "user_limit", "user_cap", "users", "blocked", "capped",
                 "share", "max_share", "track", "kind", "pend")

    def __init__(self, spec: QueueSpec, policy: "Policy", share: float, max_share: float):
        self.spec = spec
        self.name = spec.full_name
        self.children: list[QueueState] = []
        self.weight = spec.weight
        self.policy = policy                # orders this queue's children (apps, for a leaf)
        self.agg = 0.0                      # Σ n_i w_i u_i under the parent's policy
        self.usage: list[float] = []
        self.running_apps = 0
        self.mask = 0                       # slots of the subtree's apps
        self.waiting = 0                    # ... of those not yet running (max_apps)
        self.min: list[float] | None = None
        self.max: list[float] | None = None
        self.max_apps = spec.max_apps
        self.user_limit = spec.user_limit
        self.user_cap: list[float] = []
        self.users: dict[str, list] = {}    # user -> [usage vector, slots of its apps]
        self.blocked: set[int] = set()
        self.capped = spec.max_apps is not None or spec.user_limit is not None or bool(spec.max) \
            or spec.max_capacity is not None
        self.share, self.max_share = share, max_share     # of the cluster, by capacity
        #: the share kind of the parent's policy when it aggregates by usage (DRF, cmmf):
        #: the queue's share is then that formula of its usage Σ n_i d_i (set by the tree)
        self.kind: ShareKind | None = None
        #: keep the usage vector: only a queue with a min, a cap or a usage share reads it
        self.track = self.capped or bool(spec.min) or spec.capacity is not None
        #: Σ p_i d_i over the subtree's apps with p_i tasks pending, once the tree keeps it
        #: (``QueueTreeState.track_pending``: preemption's demand U + P reads it)
        self.pend: list[float] = []

    def min_ratio(self) -> float:
        """max_r U_r / min_r over the resources its min names (inf: no min): below 1, the
        queue is below its min."""
        lo = self.min
        if lo is None:
            return INF
        return max((u / m for u, m in zip(self.usage, lo) if m > 0), default=INF)

    def __repr__(self) -> str:
        return f"QueueState({self.name}, agg={self.agg:g}, running_apps={self.running_apps})"


class Member:
    """An app's place in the tree: its queues leaf first (root excluded), and what one of
    its tasks adds to each one's aggregate."""

    __slots__ = ("path", "contrib", "bit", "admitted", "user", "capped")

    def __init__(self, path: list[QueueState], user: str):
        self.path = path
        self.capped = [q for q in path if q.capped]     # the queues whose caps may block it
        self.contrib: list[float] = [0.0] * len(path)
        self.bit = 0
        self.admitted = False
        self.user = user
