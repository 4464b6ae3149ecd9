"""The queue tree at run time: each queue's share, usage and caps, and the offer's descent.

Hierarchical TSF (docs/design.md, "Queues"): a free node goes down the tree.  At each
queue, of its *active* children — those whose subtree has a pending task that fits the
node within every cap on the way — the one of least ``(needy, ρ, name)`` takes it:

* needy: a child below its ``min`` (max_r U_cr / min_cr < 1 over the resources its min
  names, U_c its usage) comes first, least ratio first (YARN's needy test, read on the
  dominant resource);
* ρ, the child's share per unit of weight: for a leaf ρ_L = S_L / W_L with
  S_L = Σ_{i ∈ L} n_i w_i u_i, u_i the parent's policy's per-task unit of app i
  (``Policy.unit``); under TSF w_i u_i = 1/h_i and S_L = Σ_{i ∈ L} n_i / h_i, the task
  shares of its apps (tsf-paper §V-A) added up.  A parent's policy whose share kind
  aggregates by usage (``ShareKind.aggregate``: DRF's dominant share, cmmf's resource
  share) counts a child as its formula of the child's usage Σ n_i d_i instead.  For a parent,
  ρ_Q = (Σ_{c ∈ A(Q)} W_c / W_Q) · min_{c ∈ A(Q)} ρ_c over its active children A(Q):
  its active children are rescaled to the least served of them and the others left out,
  the two corrections H-DRF makes to a naive hierarchy (Bhattacharya et al., SoCC 2013);
* ties on the queue's name.

With one leaf this is flat TSF; with backlogged leaves under one parent it equalises
S_L / W_L, so leaves hold task shares in proportion to their weights whatever their job
counts.  ``naive=True`` orders parents by S_Q / W_Q over all their apps instead (the
aggregate H-DRF shows starving a queue; kept for the tests that show it).

Caps filter the candidates, never the order: a child whose usage plus the task would
exceed its ``max``; whose running apps are at ``max_apps`` (its apps not yet running
wait); one of whose users would hold more than ``user_limit`` of the queue's resources.
Candidates are bitsets over the pending index's slots (``rayrm.rm.core.pending``):
``fits_mask(node, vector)`` names the pending apps that may use the node and fit under
``vector``, and the intersection of such sets is exact (fit is per resource, ≤).

Where a cap removed a candidate on node m, m is kept on the queue (``blocked``): the
scheduler's invariant (no pending app fits a node after ``schedule()``) then holds only
"within the caps", and the queue's caps loosen only when its own usage or running apps
fall, so those nodes are offered again then (``release``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rayrm.rm.core.native import compiled
from rayrm.rm.core.queues.accounts import Member, QueueState
from rayrm.rm.core.queues.fairshare import steady_shares
from rayrm.rm.core.queues.tree import QueueSpec, QueueTree, child_shares, resolve_bounds
from rayrm.rm.core.shares import Holders, dominant_per_task

if TYPE_CHECKING:
    from rayrm.rm.core.cluster import AppState, ClusterState
    from rayrm.rm.core.pending import PendingIndex
    from rayrm.rm.core.policies import Policy

INF = math.inf
#: above this many candidates in the chosen leaf, walk the sorted order to the first of them
LEAF_WALK = 16


class QueueTreeState:
    """Every queue's accounting, and ``choose``: the app the tree offers a node to."""

    #: the resources a queue's share of the cluster is read on where the rules compare queues
    #: (preemption): None, all of them (the dominant share); YARN's schedulers, memory
    share_resources: tuple[int, ...] | None = None
    #: each queue keeps ``pend`` (``track_pending``), and its usage (``track_usage``)
    tracks_pending = False
    tracks_usage = False

    def __init__(self, tree: QueueTree, policies: dict, default: "Policy", cluster: "ClusterState",
                 index: "PendingIndex", naive: bool = False):
        self.tree, self.cluster, self.index = tree, cluster, index
        self.naive = naive
        #: the compiled tree (``rayrm.rm.core.native._tree``) under the native core: its walk
        #: mirrors this class's ``_scan`` (a subclass with its own keeps the Python one)
        self._native = index.native
        self._native_choose = index.native and type(self)._scan is QueueTreeState._scan
        self.members: dict[str, Member] = {}
        self.by_path: dict[str, QueueState] = {}
        self._gen = index.generation

        def build(spec: QueueSpec, share: float, max_share: float) -> QueueState:
            q = QueueState(spec, policies.get(spec.policy, default) if spec.policy else default,
                           share, max_share)
            self.by_path[spec.path] = q
            for c, cs, cm in child_shares(spec, share, max_share):
                q.children.append(build(c, cs, cm))
            return q

        self.root = build(tree.root, 1.0, 1.0)
        self.queues = list(self.by_path.values())
        for q in self.queues:
            kind = q.policy.share_kind()
            if kind.aggregate == "usage":
                for c in q.children:
                    c.kind, c.track = kind, True
        self.resolve()

    def leaf(self, path: str) -> QueueState:
        return self.by_path[path]

    # ----- bounds and rebuilds ---------------------------------------------------

    def resolve(self) -> None:
        """min, max and the user-limit base in absolute amounts for the cluster now."""
        dims = self.cluster.dims
        total = dict(zip(dims, self.cluster.total))
        for q in self.queues:
            lo, hi = resolve_bounds(q.spec, total, q.share, q.max_share)
            q.min = [lo.get(d, 0.0) for d in dims] if lo else None
            q.max = [hi.get(d, INF) for d in dims] if hi else None
            base = q.max or [INF] * len(dims)
            if q.user_limit is not None:
                q.user_cap = [q.user_limit * (b if b < INF else t) for b, t in zip(base, self.cluster.total)]
            width = len(self.cluster.dims) + len(self.cluster.virtual_dims)
            if len(q.usage) != width:
                q.usage = [0.0] * width
            if q.max is not None:
                q.max += [INF] * (width - len(q.max))
            if q.user_cap:
                q.user_cap += [INF] * (width - len(q.user_cap))

    def track_usage(self) -> None:
        """Keep every queue's usage vector from now on (preemption reads them at each
        evaluation), computed once here for the queues that did not keep one."""
        if self.tracks_usage:
            return
        self.tracks_usage = True
        fresh = [q for q in self.queues if not q.track and q is not self.root]
        if not fresh:
            return
        for q in fresh:
            q.usage = [0.0] * len(q.usage)
            q.track = True
        apps, fresh = self.cluster.apps, set(map(id, fresh))
        for app_id, member in self.members.items():
            app = apps[app_id]
            if app.running:
                for q in member.path:
                    if id(q) in fresh:
                        usage = q.usage
                        for r, d in enumerate(app.demand):
                            usage[r] += app.running * d

    def track_pending(self) -> None:
        """Keep every queue's pending demand ``pend`` from now on, computed once here; then
        ``asked`` follows each change of an app's pending count."""
        if self.tracks_pending:
            return
        self.tracks_pending = True
        k = len(self.cluster.total)
        for q in self.queues:
            q.pend = [0.0] * k
        apps = self.cluster.apps
        for app_id, member in self.members.items():
            self.asked(apps[app_id], apps[app_id].pending)

    def asked(self, app: "AppState", n: int) -> None:
        """``app``'s pending count changed by ``n`` other than by a placement (``allocated``
        counts those), tracked once ``track_pending`` ran."""
        if not self.tracks_pending or not n:
            return
        member = self.members.get(app.app_id)
        if member is None:
            return
        share = [n * x for x in app.demand[:len(self.cluster.total)]]
        for q in member.path:
            pend = q.pend
            for r, x in enumerate(share):
                pend[r] += x

    def rebuild(self) -> list[int]:
        """Recompute every aggregate, usage and slot set from the apps (nodes joined or
        left: units and percentages changed); returns the nodes any cap blocked."""
        self.resolve()
        for q in self.queues:
            q.agg, q.mask, q.waiting, q.running_apps = 0.0, 0, 0, 0
            q.usage = [0.0] * len(q.usage)
            q.users = {}
        apps = self.cluster.apps
        for app_id, member in self.members.items():
            self._place_in(apps[app_id], member)
        return self.take_blocked(self.queues)

    def _place_in(self, app: "AppState", member: Member) -> None:
        member.bit = self.index.bit(app.app_id)
        self._contributions(app, member)
        n = app.running
        for k, q in enumerate(member.path):
            q.mask |= member.bit
            if member.admitted:
                q.running_apps += 1
            else:
                q.waiting |= member.bit
            if q.user_limit is not None:
                q.users.setdefault(member.user, [[0.0] * len(q.usage), 0])[1] |= member.bit
            if n:
                q.agg += n * member.contrib[k]
                if q.track:
                    self._add_usage(q, member.user, app.demand, n)

    def _contributions(self, app: "AppState", member: Member) -> None:
        """w_i u_i of the app under the policy of each of its queues' parent.  Under its
        leaf's own policy u_i is the app's ``unit``, which the scheduler has just computed
        with it on this cluster (at submission, and for every app before a rebuild)."""
        parents = member.path[1:] + [self.root]
        view, cview = app.view, self.cluster.view
        own = member.path[0].policy
        for k, p in enumerate(parents):
            u = app.unit if p.policy is own else p.policy.unit(view, cview)
            member.contrib[k] = u * app.weight if u < INF else 0.0

    @staticmethod
    def _add_usage(q: QueueState, user: str, demand, n: int) -> None:
        usage = q.usage
        for r, d in enumerate(demand):
            usage[r] += n * d
        if q.user_limit is not None:
            uu = q.users[user][0]
            for r, d in enumerate(demand):
                uu[r] += n * d

    # ----- apps --------------------------------------------------------------------

    def attach(self, app: "AppState", leaf: QueueState) -> None:
        """A submitted app joins its leaf (and every queue above it)."""
        path, q = [], leaf
        while q is not self.root:
            path.append(q)
            q = self._parent(q)
        member = Member(path, app.spec.user)
        self.members[app.app_id] = member
        if self.index.generation != self._gen:      # slots renumbered: rebuild every bitset
            self._gen = self.index.generation
            for q in self.queues:
                q.mask = q.waiting = 0
                for u in q.users.values():
                    u[1] = 0
            apps = self.cluster.apps
            for app_id, m in self.members.items():
                if m is not member:
                    self._rebit(apps[app_id], m)
        self._place_in(app, member)

    def _rebit(self, app: "AppState", member: Member) -> None:
        member.bit = bit = self.index.bit(app.app_id)
        for q in member.path:
            q.mask |= bit
            if not member.admitted:
                q.waiting |= bit
            if q.user_limit is not None:
                q.users[member.user][1] |= bit

    def _parent(self, q: QueueState) -> QueueState:
        path = q.spec.path
        return self.by_path[path.rpartition(".")[0]] if "." in path else self.root

    def allocated(self, app: "AppState") -> None:
        """One more task of ``app`` runs, one fewer pending."""
        if self._native:
            return compiled("_tree").allocated(self, app)
        member = self.members[app.app_id]
        demand, user, contrib = app.demand, member.user, member.contrib
        admit = not member.admitted
        member.admitted = True
        pending = self.tracks_pending
        for k, q in enumerate(member.path):
            q.agg += contrib[k]
            if q.track:
                self._add_usage(q, user, demand, 1)
            if pending:
                pend = q.pend
                for r in range(len(pend)):
                    pend[r] -= demand[r]
            if admit:
                q.running_apps += 1
                q.waiting &= ~member.bit

    def released(self, app: "AppState", n: int = 1) -> list[int]:
        """``n`` tasks of ``app`` ended; returns the nodes its queues' caps had blocked."""
        if self._native:
            return compiled("_tree").released(self, app, n)
        member = self.members[app.app_id]
        for k, q in enumerate(member.path):
            q.agg -= n * member.contrib[k]
            if q.track:
                self._add_usage(q, member.user, app.demand, -n)
        return self.take_blocked(member.capped) if member.capped else ()

    def finished(self, app: "AppState", running: int) -> list[int]:
        """The app is done; ``running``: its tasks still running, released with it."""
        member = self.members.pop(app.app_id)
        bit = member.bit
        for k, q in enumerate(member.path):
            if running:
                q.agg -= running * member.contrib[k]
                if q.track:
                    self._add_usage(q, member.user, app.demand, -running)
            q.mask &= ~bit
            q.waiting &= ~bit
            if member.admitted:
                q.running_apps -= 1
            if q.user_limit is not None:
                q.users[member.user][1] &= ~bit
        return self.take_blocked(member.path)

    @staticmethod
    def take_blocked(queues) -> list[int]:
        out: list[int] = []
        for q in queues:
            if q.blocked:
                out.extend(q.blocked)
                q.blocked = set()
        return out

    def usage_share(self, q: QueueState, weight: float) -> float:
        """S_Q / weight under a usage-aggregating kind: its formula of the queue's usage as
        one holder (``ShareKind``, rm/core/shares.py), the cluster's totals now."""
        cluster = self.cluster
        total = tuple(cluster.total) + tuple(cluster.virtual_total)
        real = len(cluster.dims)
        usage = tuple(q.usage)
        dominant = float(dominant_per_task([usage[:real]], total[:real])[0])
        holder = Holders(tuple(cluster.dims) + tuple(cluster.virtual_dims), real, total, usage, weight,
                         1.0, 1.0, dominant)
        return float(q.kind.of(1.0, holder))

    def share(self, q: QueueState) -> float:
        """S_Q, the queue's share under its parent's policy at weight 1."""
        return q.agg if q.kind is None else self.usage_share(q, 1.0)

    def report(self) -> list[dict]:
        """Every queue below root now, parents first: its full name, weight, S_Q (the share
        its parent's policy counts), steady fair share F_Q (``fairshare.steady_shares``),
        running apps, usage per resource (from the apps: kept incrementally only where a
        min or cap reads it), min and max.  For readers outside the offer (the UI, REST)."""
        dims = self.cluster.dims
        usage = {q.name: [0.0] * len(dims) for q in self.queues}
        apps = self.cluster.apps
        for app_id, member in self.members.items():
            app = apps[app_id]
            if app.running:
                for q in member.path:
                    u = usage[q.name]
                    for r in range(len(dims)):
                        u[r] += app.running * app.demand[r]
        fair = steady_shares(self.tree, dict(zip(dims, self.cluster.total)))
        out = []
        for q in self.queues:
            for c in q.children:
                out.append({"queue": c.name, "weight": c.weight, "share": self.share(c),
                            "fair_share": fair[c.spec.path],
                            "running_apps": c.running_apps, "leaf": not c.children,
                            "usage": dict(zip(dims, usage[c.name])),
                            "min": dict(zip(dims, c.min)) if c.min is not None else None,
                            "max": {d: x for d, x in zip(dims, c.max) if x < INF} if c.max is not None else None})
        return out

    # ----- the offer ---------------------------------------------------------------

    #: nodes whose re-offer waits for the round (``KeyedTreeState``): none here
    deferred = False

    def offer_round(self, dirty: set, fresh: bool):
        """The nodes a round of offers goes through, in node order: the dirty ones."""
        return sorted(dirty)

    def close_round(self, stopped: int | None) -> None:
        """The round is over (``stopped``: the node after which nothing was pending)."""

    def node_changed(self, m: int) -> None:
        """A container on node m ended outside an offer."""

    def choose(self, m: int, free, order: list) -> "AppState | None":
        """The app node ``m`` (with ``free`` left) is offered to: down the tree, at each
        queue to the active child (one with a candidate on m within its caps) of least
        ``(needy, ρ, name)``, then the least entry among the leaf's candidates (``order``:
        every pending app's entry, sorted).  The compiled core's ``tree_choose`` under the
        native core (the same walk)."""
        if self._native_choose:
            return compiled("_tree").choose(self, m, free, order)
        index = self.index
        fit = index.fits_mask(m, free)
        q = self.root
        memo: dict = {}
        while fit and q.children:
            found = memo[q] if q in memo else self._scan(q, fit, m, memo)
            if found is None:
                return None
            q, fit = found[0], found[1]
        if not fit:
            return None
        if fit.bit_count() > LEAF_WALK:
            # many candidates: the first of them in the sorted order is the least
            bit = index.bit
            for entry in order:
                if fit & bit(entry[2]):
                    return entry[3]
        best_entry = None
        while fit:
            low = fit & -fit
            entry = index.item(low).entry
            if best_entry is None or entry < best_entry:
                best_entry = entry
            fit ^= low
        return best_entry[3]

    def _scan(self, q: QueueState, fit: int, m: int, memo: dict) -> tuple | None:
        """q's active children on node m (candidates ``fit``): (the one of least (needy, ρ,
        name), its candidates, min ρ over them, Σ their weights), None if none is active;
        kept in ``memo`` for the descent."""
        best = None
        best_cf, b_tier, b_val = 0, 2, INF
        low, wsum = INF, 0.0
        naive = self.naive
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
            if c.children and not naive:
                below = self._scan(c, cf, m, memo)
                if below is None:
                    continue
                rho = below[2] * below[3] / c.weight
            elif c.kind is None:
                rho = c.agg / c.weight
            else:
                rho = self.usage_share(c, c.weight)
            if rho < low:
                low = rho
            wsum += c.weight
            tier, val = 1, rho
            if c.min is not None:
                ratio = c.min_ratio()
                if ratio < 1:
                    tier, val = 0, ratio
            if tier < b_tier or (tier == b_tier and (val < b_val or (val == b_val and c.name < best.name))):
                best, best_cf, b_tier, b_val = c, cf, tier, val
        found = None if best is None else (best, best_cf, low, wsum)
        memo[q] = found
        return found

    def _within_caps(self, q: QueueState, cf: int) -> int:
        """The candidates ``cf`` of queue q (pending apps that fit one node) that its max,
        max_apps and user_limit admit: ``cf & A_q`` for a set A_q of q's apps that is the
        same on every node (``PendingIndex.pending_within``)."""
        cf = self._within_bounds(q, cf)
        if q.user_limit is not None and cf:
            index = self.index
            allowed = 0
            for usage, slots in q.users.values():
                uf = cf & slots
                if uf:
                    allowed |= uf & index.pending_within([c - u for c, u in zip(q.user_cap, usage)])
            cf = allowed
        return cf

    def _within_bounds(self, q: QueueState, cf: int) -> int:
        """The candidates ``cf`` of queue q that its max and max_apps admit."""
        if q.max is not None:
            cf &= self.index.pending_within([x - u for x, u in zip(q.max, q.usage)])
        if q.max_apps is not None and q.running_apps >= q.max_apps:
            cf &= ~q.waiting
        return cf
